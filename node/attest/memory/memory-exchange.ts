/**
 * The attestor runs the memory phase (memory-attestor.ts) over `/suanli/attest/1.0.0` after a
 * machine passed the GEMM phase, inside the same session: challenge → filled, walk nonce →
 * signed commit, open → walks. Each answer is stamped on arrival before anything reads it.
 */
import type { PeerId } from "@libp2p/interface";
import type { Address, Hex, TypedDataDomain } from "viem";
import { MAX_CONTROL_MESSAGE_BYTES } from "../../../common/attest/messages.js";
import type { MemoryProfile } from "../../../common/attest/memory-params.js";
import { MAX_TREE_DEPTH } from "../../../common/attest/merkle.js";
import { attestAnswerSchema } from "../../../common/attest/wire.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { ATTEST_PROTOCOL } from "../../../common/p2p/protocols.js";
import { request } from "../../../common/p2p/reqresp.js";
import { MemoryPhase, type MemoryFailure, type MemoryOutcome } from "./memory-attestor.js";

/** Extra wait beyond the phase's own deadlines, for the network. */
const NETWORK_GRACE_MS = 2_000;

export type MemoryExchangeOptions = {
  host: SuanliHost;
  peer: PeerId;
  profile: MemoryProfile;
  domain: TypedDataDomain;
  claim: { provider: Address; model: string; units: number; vramMiB: number };
  challengeId: Hex;
  now: () => number;
};

function errorText(error: unknown): string {
  return (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 500);
}

/** Runs the whole memory phase with the provider; resolves with its outcome (never throws for the provider's faults). */
export async function runMemoryPhase(o: MemoryExchangeOptions): Promise<MemoryOutcome> {
  const phase = MemoryPhase.start({ profile: o.profile, claim: o.claim, challengeId: o.challengeId, provider: o.claim.provider, domain: o.domain, now: o.now });
  const ask = async (
    body: unknown,
    deadlineAtMs: number,
    maxMessageBytes: number,
  ): Promise<{ answer: { type: string; reason?: string; message?: string }; atMs: number } | MemoryFailure> => {
    try {
      const answer = await request(o.host, o.peer, ATTEST_PROTOCOL, body, {
        responseSchema: attestAnswerSchema,
        timeoutMs: Math.max(1, deadlineAtMs - o.now()) + NETWORK_GRACE_MS,
        maxMessageBytes,
      });
      const atMs = o.now();
      const typed = answer as { type: string; reason?: string; message?: string };
      if (typed.type === "refused")
        return { outcome: "fail", id: phase.id, reason: "malformed", detail: `the provider refused the memory phase (${typed.reason}): ${typed.message ?? ""}`.slice(0, 500) };
      return { answer: typed, atMs };
    } catch (error) {
      const timedOut = (error as Error)?.name === "RequestTimeoutError" ? phase.onTimeout(Math.max(o.now(), phase.timeoutAtMs ?? 0)) : undefined;
      return timedOut ?? { outcome: "fail", id: phase.id, reason: "malformed", detail: `the memory phase broke off: ${errorText(error)}` };
    }
  };
  const filled = await ask(phase.message, phase.message.fillCutoffAtMs, MAX_CONTROL_MESSAGE_BYTES);
  if ("outcome" in filled) return filled;
  const walk = phase.onFilled(filled.answer, filled.atMs);
  if (walk.outcome === "fail") return walk;
  const commitBytes = 512 + phase.params.units * 250;
  const commit = await ask(walk.message, walk.message.cutoffAtMs, commitBytes);
  if ("outcome" in commit) return commit;
  const open = await phase.onCommit(commit.answer, commit.atMs);
  if (open.outcome === "fail") return open;
  const walksBytes = 512 + open.request.walks.length * (120 + MAX_TREE_DEPTH * 70);
  const walks = await ask(open.request, commit.atMs + phase.params.openTimeoutMs, walksBytes);
  if ("outcome" in walks) return walks;
  return phase.onWalks(walks.answer, walks.atMs);
}
