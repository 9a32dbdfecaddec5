/**
 * Answers disputes of this attestor's attestations (contracts/AttestorStaking.sol): an attestor that
 * does not answer within the window is slashed. Every passed challenge keeps the provider's signed
 * commit in its result record (challenge/results.ts `commit`); the answer is that commit, which the contract
 * verifies against the attestation's provider, challenge id, root and GPUs. Scans `DisputeOpened`
 * events naming this attestor, in bounded block ranges, from where the last scan ended.
 */
import type { Account, Address, Chain, Hex, Transport, WalletClient } from "viem";
import { attestorStakingAbi } from "../../../common/abi.js";
import { disputeCommitArgs } from "../../../common/attest/commit.js";
import type { ChallengeResults } from "../challenge/index.js";
import { StakingScanner, type StakingScannerOptions } from "./staking-scanner.js";

/** Most of a machine's records searched for a disputed challenge (challenge/results.ts keeps unexpired passes beyond its limit). */
const MAX_RECORDS = 1_000;

export type DisputeAnswererOptions = StakingScannerOptions & {
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  /** This attestor's address. */
  attestor: Address;
  results: ChallengeResults;
};

/** What became of one dispute. */
export type DisputeAnswer = { id: Hex; outcome: "answered" | "no_record" | "closed" | "failed"; detail?: string };

export class DisputeAnswerer extends StakingScanner<DisputeAnswer> {
  constructor(private readonly o: DisputeAnswererOptions) {
    super(o, { without: "No attestor staking on this registry: no disputes to answer", what: "Dispute scan" });
  }

  /** Answers every dispute opened against this attestor in the range. */
  protected async scanRange(staking: Address, fromBlock: bigint, toBlock: bigint): Promise<DisputeAnswer[]> {
    const events = await this.o.publicClient.getContractEvents({
      address: staking,
      abi: attestorStakingAbi,
      eventName: "DisputeOpened",
      args: { attestor: this.o.attestor },
      fromBlock,
      toBlock,
      strict: true,
    });
    const answers: DisputeAnswer[] = [];
    for (const event of events) answers.push(await this.answer(staking, event.args.id, event.args.machineId, event.args.challengeId));
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
