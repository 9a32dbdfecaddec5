/**
 * Shared setup of the AttestorStaking tests: the Suanli of support/suanli.ts with an AttestorStaking attached,
 * every attestor, provider and `other` funded and approved, the first two attestors staked (the third not), and
 * the books check (money in = money out) both test files assert after each move.
 */
import assert from "node:assert/strict";
import { zeroAddress, type Address } from "viem";
import { balance, deploySuanli, type Connection, type Suanli } from "./suanli.js";

export const MIN_STAKE = 1_000n * 10n ** 6n;
export const SLASH = 600n * 10n ** 6n;
export const FEE = 10n * 10n ** 6n;
export const ANSWER_WINDOW = 3_600;
export const UNBONDING = 7_200;
/** Seconds of silence before an attestor may sign a liveness fault (the node's default QoS window). */
export const FAULT_WINDOW = 30;
export const PARAMS = (sink: Address) => ({
  minStake: MIN_STAKE,
  slashAmount: SLASH,
  disputeFee: FEE,
  answerWindow: ANSWER_WINDOW,
  unbondingDelay: UNBONDING,
  disputerShareBps: 5_000,
  sink,
  faultWindow: FAULT_WINDOW,
});
const MAX_UINT = 2n ** 256n - 1n;

/**
 * Deploys an AttestorStaking for `s` (replacing `predecessor`, zero for the first), attaches it to the registry and
 * funds and approves the attestors, the provider and `other`.
 */
export async function deployStaking(connection: Connection, s: Suanli, predecessor: Address = zeroAddress) {
  const staking = await connection.viem.deployContract("AttestorStaking", [s.registry.address, s.market.address, PARAMS(s.treasury!.account.address), predecessor]);
  await s.registry.write.setAttestorStaking([staking.address]);
  for (const w of [...s.attestors, s.provider, s.other]) {
    await s.token.write.faucet([w!.account.address, 10n * MIN_STAKE]);
    await s.token.write.approve([staking.address, MAX_UINT], { account: w!.account });
  }
  return staking;
}

/** Suanli with the staking deployed; the first two attestors stake the minimum, the third does not. */
export async function stakedSuanli(connection: Connection, token: "TestToken" | "BlocklistToken" = "TestToken") {
  const s = await deploySuanli(connection, undefined, { token });
  const staking = await deployStaking(connection, s);
  for (const w of s.attestors.slice(0, 2)) await staking.write.stake([MIN_STAKE], { account: w!.account });
  return { ...s, staking };
}

export type StakedSuanli = Awaited<ReturnType<typeof stakedSuanli>>;

/** Money in = money out: the contract holds exactly what its books say (stakes, open dispute fees, what is owed). */
export async function assertBooks(s: StakedSuanli, accounts: Address[], openFees: bigint) {
  let sum = openFees;
  for (const a of accounts) {
    const st = await s.staking.read.stakeOf([a]);
    sum += st.active + st.unbonding + (await s.staking.read.owed([a]));
  }
  assert.equal(await balance(s as Suanli, s.staking.address), sum);
}

/** Every account that can hold stake or be owed something. */
export const everyone = (s: StakedSuanli) => [...s.attestors, s.provider, s.other, s.treasury, s.renter].map((w) => w!.account.address);
