/**
 * The set-up the in-lease attestation tests test/node/attest-backoff and attest-busy share: a
 * provider daemon whose machines are declared on-chain, their offers published, and a renter's
 * active lease on the first one; a runner the test switches between honest and wrong rows, or
 * holds; and the attestor options that keep an attestor's own checks out of the way.
 */
import { testTokenAbi } from "../../common/abi.js";
import type { LeaseChecks } from "../../common/attest/lease-checks.js";
import type { ProviderMachine } from "../../node/attest/challenge/index.js";
import type { CpuRunner, Runner, RunnerChallenge, RunnerCommitment } from "../../node/attest/runner/index.js";
import { addrOf, DURATION, machineOffer, openActiveLease, PRICE, startAttestorDaemon, startProviderDaemon, TEST_MACHINE, WrongRowsRunner, type TestDaemon } from "./attest.js";
import { fund, registerProvider, send, type Devnet } from "./devnet.js";

/** No in-lease checks of an attestor's own during a test: a first check assumed to cost 10 min, which no lease share allows within minutes. */
export const NO_OWN_CHECKS = { tickMs: 200, assumedChallengeMs: 600_000 };
/** Liveness probes every second, faults after two missed ones in a 30 s window, a co-signer's backup after 3 s. */
export const TEST_LIVENESS = { probeIntervalMs: 1_000, probeTimeoutMs: 2_000, qosWindowSeconds: 30, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };

/** Honest until told to cheat (`cheating = true`: the machine answers wrong rows, as one swapped for a broken one mid-lease would). */
export class SwitchRunner implements Runner {
  readonly name = "switch";
  cheating = false;
  /** While cheating, only these machines answer wrong rows (every machine when empty): a round challenges the others too. */
  readonly only = new Set<number>();
  private readonly wrong = new WrongRowsRunner();
  constructor(private readonly honest: Runner) {}
  computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }) {
    const cheat = this.cheating && (this.only.size === 0 || (challenge.machineId !== undefined && this.only.has(challenge.machineId)));
    return cheat ? this.wrong.computeCommit(challenge) : this.honest.computeCommit(challenge, options);
  }
  async close(): Promise<void> {}
}

/** An honest runner the test can hold (`held = true`: a long challenge keeps the GPU until `release()`) or switch to wrong rows. */
export class HeldRunner implements Runner {
  readonly name = "held";
  held = false;
  cheating = false;
  /** Challenges that waited while held. */
  holding = 0;
  private waiters: (() => void)[] = [];
  private readonly wrong = new WrongRowsRunner();
  constructor(private readonly cpu: CpuRunner) {}
  release(): void {
    this.held = false;
    for (const wake of this.waiters.splice(0)) wake();
  }
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    if (this.held) {
      this.holding++;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        options?.signal?.addEventListener("abort", () => resolve(), { once: true });
      });
      if (options?.signal?.aborted) throw options.signal.reason;
    }
    return this.cheating ? this.wrong.computeCommit(challenge) : this.cpu.computeCommit(challenge, options);
  }
  async close(): Promise<void> {}
}

export type LeasedProvider = {
  provider: Awaited<ReturnType<typeof startProviderDaemon>>;
  /** The provider's machines as declared, the leased one first. */
  machines: ProviderMachine[];
  machineIds: number[];
  leaseId: bigint;
  renter: Awaited<ReturnType<Devnet["wallet"]>>;
  deposit: bigint;
};

/**
 * A provider daemon (devnet account `index`) with `count` machines declared (TEST_MACHINE each),
 * the first machine's offer published (with `leaseChecks` when given; `publishAll` publishes every
 * machine's) and an active lease on it by devnet account 5. Push `provider.daemon` to the test's
 * node list to close it.
 */
export async function leasedProvider(
  devnet: Devnet,
  index: number,
  runner: Runner,
  options: { count?: number; leaseChecks?: LeaseChecks; publishAll?: boolean; provider?: Omit<Parameters<typeof startProviderDaemon>[2], "runner" | "machines"> } = {},
): Promise<LeasedProvider> {
  const machines: ProviderMachine[] = [];
  const provider = await startProviderDaemon(devnet, index, { ...options.provider, runner, machines: () => machines });
  try {
    const machineIds = await registerProvider(devnet, await devnet.wallet(index), {
      peerId: provider.daemon.p2p.host.peerId.toString(),
      stake: 10_000_000n,
      machines: Array.from({ length: options.count ?? 1 }, () => TEST_MACHINE),
    });
    machines.push(...machineIds.map((machineId) => ({ machineId, ...TEST_MACHINE })));
    for (const machine of options.publishAll ? machines : machines.slice(0, 1)) {
      await provider.daemon.offers.publisher!.set({ ...machineOffer(machine), ...(options.leaseChecks ? { leaseChecks: options.leaseChecks } : {}) });
    }
    const renter = await devnet.wallet(5);
    const deposit = PRICE * BigInt(DURATION);
    await fund(devnet, renter, deposit);
    await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [devnet.deployment.contracts.market!, deposit] } as never);
    const leaseId = await openActiveLease(devnet, renter, index, machineIds[0]!);
    return { provider, machines, machineIds, leaseId, renter, deposit };
  } catch (error) {
    await provider.daemon.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Attestors 6 (A) and 7 (B) around a provider, as the in-lease tests run them: B joins through the
 * provider, A through the provider and B (so they exchange faults); both with the `attest` options
 * given. Both daemons are pushed to `nodes` for the test to close.
 */
export async function startAttestorPair(devnet: Devnet, provider: TestDaemon, attest: Record<string, unknown>, nodes: TestDaemon[]) {
  const b = await startAttestorDaemon(devnet, 7, { p2p: { bootstrap: [addrOf(provider)] }, attest });
  nodes.push(b.daemon);
  const a = await startAttestorDaemon(devnet, 6, { p2p: { bootstrap: [addrOf(provider), addrOf(b.daemon)] }, attest });
  nodes.push(a.daemon);
  return { a, b };
}
