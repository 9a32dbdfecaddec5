/**
 * Running the sponsor in a node (docs/aa.md "Gas without ETH"): its key from the data dir
 * (`sponsor.key`, made on the first start; the paymaster's owner sets its address with
 * `setSigner`), the deployment's paymaster, EntryPoint and contracts, the budget in the node's
 * store, the ERC-7677 server on `sponsor.host:port`. The daemon runs it when `sponsor.enabled` is set.
 */
import { getAddress } from "viem";
import { sponsorPaymasterAbi } from "../../common/abi.js";
import { SuanliError } from "../../common/errors.js";
import type { Daemon, DaemonModule } from "../daemon.js";
import { loadNodeKey } from "../gateway/key.js";
import { Bucket } from "../store/buckets.js";
import { createSponsorServer, type SponsorSpend } from "./service.js";

export const SPONSOR_KEY_FILE = "sponsor.key";

export type SponsorModule = DaemonModule & {
  /** Where it listens (`http://127.0.0.1:8095`): the paymaster URL for viem's `createPaymasterClient`. */
  url: string;
  /** The sponsor key's address: the paymaster's `signer` must be it. */
  address: `0x${string}`;
};

/** Starts the sponsor on a running daemon with `daemon.config.sponsor`. */
export async function startSponsor(daemon: Daemon): Promise<SponsorModule> {
  const options = daemon.config.sponsor;
  const logger = daemon.logger.child({ module: "sponsor" });
  const { paymaster, entryPoint, accountFactory, passkeyAccountFactory, token, market, sessions } = daemon.deployment.contracts;
  if (!paymaster || !entryPoint || !accountFactory || !market) {
    throw new SuanliError("The deployment has no SponsorPaymaster: deploy with --account-abstraction and a sponsor signer (docs/aa.md) before sponsor.enabled");
  }
  const account = await loadNodeKey(daemon.config.dataDir, SPONSOR_KEY_FILE, "sponsor");
  const signer = await daemon.chain.publicClient.readContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName: "signer" });
  if (getAddress(signer) !== account.address) {
    // It serves anyway (the owner may set it next), but every sponsorship fails on-chain until then.
    logger.warn("The paymaster's signer is not this sponsor's key: its sponsorships fail until the owner calls setSigner", { paymaster, signer, key: account.address });
  }
  const server = await createSponsorServer({
    options,
    account,
    paymaster,
    entryPoint,
    chainId: daemon.deployment.chainId,
    scope: { token, market, sessions, accountFactory, passkeyAccountFactory },
    budget: daemon.store.repository<SponsorSpend>(Bucket.sponsorBudget),
    logger,
  });
  const url = await server.listen();
  logger.info("Sponsor serving", { url, address: account.address, paymaster });
  return { name: "sponsor", url, address: account.address, stop: () => server.close() };
}
