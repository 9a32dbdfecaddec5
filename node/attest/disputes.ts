/**
 * Answers disputes of this attestor's attestations (contracts/AttestorStaking.sol): an attestor that
 * does not answer within the window is slashed. Every passed challenge keeps the provider's signed
 * commit in its result record (results.ts `commit`); the answer is that commit, which the contract
 * verifies against the attestation's provider, challenge id, root and GPUs. Scans `DisputeOpened`
 * events naming this attestor, in bounded block ranges, from where the last scan ended.
 */
import type { Account, Address, Chain, Hex, PublicClient, Transport, WalletClient } from "viem";
import { attestorStakingAbi, providerRegistryAbi } from "../../common/abi.js";
import { disputeCommitArgs } from "../../common/attest/commit.js";
import type { Logger } from "../log/logger.js";
import type { ChallengeResults } from "./results.js";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";
/** Most blocks one log query covers. */
const MAX_RANGE = 5_000n;
/** Most of a machine's records searched for a disputed challenge (results.ts keeps unexpired passes beyond its limit). */
const MAX_RECORDS = 1_000;

export type DisputeAnswererOptions = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  registry: Address;
  /** This attestor's address. */
  attestor: Address;
  results: ChallengeResults;
  /** First block to scan (the deployment block). */
  fromBlock: bigint;
  /** Milliseconds between scans. */
  intervalMs: number;
  logger: Logger;
};

/** What became of one dispute. */
export type DisputeAnswer = { id: Hex; outcome: "answered" | "no_record" | "closed" | "failed"; detail?: string };

export class DisputeAnswerer {
  private staking: Address | undefined;
  private next: bigint;
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<DisputeAnswer[]> | undefined;
  private stopped = false;

  constructor(private readonly o: DisputeAnswererOptions) {
    this.next = o.fromBlock;
  }

  /** Reads the registry's staking contract; scans on an interval when there is one. */
  async start(): Promise<void> {
    const staking = await this.o.publicClient.readContract({ address: this.o.registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    if (staking === ZERO_ADDRESS) {
      this.o.logger.info("No attestor staking on this registry: no disputes to answer");
      return;
    }
    this.staking = staking;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.scanning?.catch(() => undefined);
  }

  /** One scan: answers every dispute opened against this attestor since the last scan. */
  scan(): Promise<DisputeAnswer[]> {
    this.scanning ??= this.scanOnce().finally(() => {
      this.scanning = undefined;
    });
    return this.scanning;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.scan()
        .catch((error: unknown) => this.o.logger.warn("Dispute scan failed; retrying at the next interval", {}, error))
        .finally(() => this.schedule());
    }, this.o.intervalMs);
    this.timer.unref();
  }

  private async scanOnce(): Promise<DisputeAnswer[]> {
    const staking = this.staking;
    if (!staking) return [];
    const head = await this.o.publicClient.getBlockNumber({ cacheTime: 0 });
    const answers: DisputeAnswer[] = [];
    while (this.next <= head && !this.stopped) {
      const to = this.next + MAX_RANGE - 1n < head ? this.next + MAX_RANGE - 1n : head;
      const events = await this.o.publicClient.getContractEvents({
        address: staking,
        abi: attestorStakingAbi,
        eventName: "DisputeOpened",
        args: { attestor: this.o.attestor },
        fromBlock: this.next,
        toBlock: to,
        strict: true,
      });
      for (const event of events) answers.push(await this.answer(staking, event.args.id, event.args.machineId, event.args.challengeId));
      this.next = to + 1n;
    }
    return answers;
  }

  private async answer(staking: Address, id: Hex, machineId: number, challengeId: Hex): Promise<DisputeAnswer> {
    const dispute = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "getDispute", args: [id] });
    if (dispute.state !== 1) return { id, outcome: "closed" };
    const history = await this.o.results.history(machineId, MAX_RECORDS);
    const record = history.find((r) => r.challengeId?.toLowerCase() === challengeId.toLowerCase() && r.outcome === "pass" && r.attestation && Array.isArray(r.commit?.roots));
    if (!record?.attestation || !record.commit) {
      this.o.logger.warn("A dispute names an attestation this attestor has no record of: it cannot answer and will be slashed", { id, machineId, challengeId });
      return { id, outcome: "no_record" };
    }
    const attestation = record.attestation.attestation;
    try {
      const hash = await this.o.walletClient.writeContract({
        address: staking,
        abi: attestorStakingAbi,
        functionName: "answerDispute",
        args: [attestation, disputeCommitArgs(record.commit), record.commit.signature],
        chain: this.o.walletClient.chain,
        account: this.o.walletClient.account,
      });
      const receipt = await this.o.publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") return { id, outcome: "failed", detail: `transaction ${hash} reverted` };
      this.o.logger.info("Dispute answered with the provider's signed commit", { id, machineId, challengeId });
      return { id, outcome: "answered" };
    } catch (error) {
      this.o.logger.warn("Answering a dispute failed", { id, machineId, challengeId }, error);
      return { id, outcome: "failed", detail: error instanceof Error ? error.message : String(error) };
    }
  }
}
