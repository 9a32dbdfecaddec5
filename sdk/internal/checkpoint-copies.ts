/**
 * Checkpoint copies on the renter's own node (issue 36, docs/data.md "Where data lives"): with the
 * client option `pinCheckpointsOn`, every newer checkpoint record the client verifies for a lease
 * is pinned on that node (POST /v1/data/pins: the node fetches the CID over bitswap from the
 * lease's provider, every block verified against the CID). The copy outlives the provider: a
 * resumed lease is given the node's libp2p addresses as hints (resume.ts), so it can fetch the
 * checkpoint after its provider was SIGKILLed. Copies run in the background, one at a time per
 * lease; a newer record asked for meanwhile replaces the one waiting. Only the newest copy of each
 * lease stays pinned: the one it replaces is unpinned once the newer one is held.
 */
import type { SignedCheckpoint } from "../../common/attest/checkpoint.js";
import type { TaskAttempt } from "../types.js";
import type { TaskStore } from "./store.js";

/** The node data actions a copy uses (Node only: the platform loads them, sdk/node.ts). */
export type NodeDataActions = {
  pinData: typeof import("../actions/pinData.js").pinData;
  removeData: typeof import("../actions/removeData.js").removeData;
  listData: typeof import("../actions/listData.js").listData;
};

/** Most of the node's addresses a copy records (a resumed spec names at most 8 hints in all). */
const MAX_NODE_ADDRS = 4;
/** Most provider addresses a pin request names (the node's pin route takes 16). */
const MAX_PIN_PROVIDERS = 16;

export class CheckpointCopies {
  private addrs: Promise<string[]> | undefined;
  private readonly running = new Map<bigint, Promise<void>>();
  private readonly waiting = new Map<bigint, TaskAttempt>();

  constructor(
    /** The renter's node's HTTP API (its data routes answer only this machine). */
    readonly nodeUrl: string,
    private readonly actions: NodeDataActions,
    private readonly tasks: TaskStore,
    private readonly progress: (line: string) => void,
  ) {}

  /** Copies the attempt's newest verified checkpoint to the node when the node does not hold it yet (in the background). */
  request(attempt: TaskAttempt): void {
    if (!newerThanCopy(attempt)) return;
    this.waiting.set(attempt.leaseId, attempt);
    if (this.running.has(attempt.leaseId)) return;
    const run = this.drain(attempt.leaseId).finally(() => this.running.delete(attempt.leaseId));
    this.running.set(attempt.leaseId, run);
  }

  /** Resolves once the lease's copies asked for so far are over (held or failed), or after `timeoutMs`. */
  async idle(leaseId: bigint, timeoutMs: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    try {
      for (let run = this.running.get(leaseId); run; run = this.running.get(leaseId)) {
        if ((await Promise.race([run.then(() => "done"), timeout.then(() => "timeout")])) === "timeout") return;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  private async drain(leaseId: bigint): Promise<void> {
    for (let attempt = this.waiting.get(leaseId); attempt; attempt = this.waiting.get(leaseId)) {
      this.waiting.delete(leaseId);
      await this.copy(attempt);
    }
  }

  /** The node's libp2p addresses (GET /v1/data), asked once; none from a node that does not say them. */
  private nodeAddrs(): Promise<string[]> {
    this.addrs ??= this.actions.listData({ nodeUrl: this.nodeUrl }).then(
      (list) => (list.node?.addrs ?? []).slice(0, MAX_NODE_ADDRS),
      (error: unknown) => {
        this.addrs = undefined;
        throw error;
      },
    );
    return this.addrs;
  }

  private async copy(attempt: TaskAttempt): Promise<void> {
    const checkpoint = attempt.checkpoint;
    if (!checkpoint || !newerThanCopy(attempt)) return;
    const { cid, seq } = checkpoint.record;
    const what = `checkpoint #${seq} (${cid}) of lease ${attempt.leaseId}`;
    try {
      const addrs = await this.nodeAddrs();
      const providers = attempt.addrs.map((addr) => (addr.includes("/p2p/") ? addr : `${addr}/p2p/${attempt.peerId}`)).slice(0, MAX_PIN_PROVIDERS);
      await this.actions.pinData(cid, { nodeUrl: this.nodeUrl, name: `checkpoint-${attempt.leaseId}-${seq}`, providers });
      if (addrs.length === 0)
        this.progress(`Your node at ${this.nodeUrl} does not say its libp2p addresses: a resumed lease can fetch ${what} from it only if already connected to it.`);
      const replaced = attempt.checkpointCopy?.checkpoint.record.cid;
      attempt.checkpointCopy = { checkpoint, nodeUrl: this.nodeUrl, addrs };
      await this.save(attempt);
      this.progress(`Copied ${what} to your node at ${this.nodeUrl}.`);
      if (replaced && replaced !== cid && !(await this.stillCopied(replaced))) {
        await this.actions.removeData(replaced, { nodeUrl: this.nodeUrl }).catch(() => undefined);
      }
    } catch (error) {
      const e = error as { name?: string; shortMessage?: string; message?: string };
      this.progress(
        `Could not copy ${what} to your node at ${this.nodeUrl} (${e.name ?? "Error"}: ${e.shortMessage ?? e.message}); its provider's copy is the only one until the next checkpoint.`,
      );
    }
  }

  /** Writes the task record holding `attempt` (the task file, when the client keeps one). */
  private async save(attempt: TaskAttempt): Promise<void> {
    const record = (await this.tasks.list()).find((task) => task.attempts.includes(attempt));
    if (record) await this.tasks.put(record);
  }

  /** Whether another lease's copy is the same CID (a checkpoint whose files did not change has the same CID). */
  private async stillCopied(cid: string): Promise<boolean> {
    return (await this.tasks.list()).some((task) => task.attempts.some((attempt) => attempt.checkpointCopy?.checkpoint.record.cid === cid));
  }
}

/** Whether the attempt's newest verified record is newer than its copy on the node. */
function newerThanCopy(attempt: TaskAttempt): boolean {
  const newest: SignedCheckpoint | undefined = attempt.checkpoint;
  return Boolean(newest && (!attempt.checkpointCopy || newest.record.seq > attempt.checkpointCopy.checkpoint.record.seq));
}
