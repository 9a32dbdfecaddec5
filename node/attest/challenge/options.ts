import { multiaddr } from "@multiformats/multiaddr";
import { z } from "zod";

/** A multiaddr that names its peer: `/ip4/10.0.0.7/tcp/4001/p2p/12D3Koo…`. */
const peerAddrSchema = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (value) => {
      try {
        return multiaddr(value)
          .getComponents()
          .some((component) => component.name === "p2p");
      } catch {
        return false;
      }
    },
    { message: "expected a multiaddr ending in /p2p/<peer id>, such as /ip4/10.0.0.7/tcp/4001/p2p/12D3KooW…" },
  );

/**
 * The attestor role (`npx suanli attestor start`): which machines it challenges and when, and which
 * other attestors it exchanges faults with.
 */
export const attestorRoleOptionsSchema = z.strictObject({
  /** How often the offer book is scanned for machines due a challenge. */
  scheduleIntervalMs: z.number().int().min(100).max(86_400_000).default(60_000),
  /**
   * A machine is challenged again once this attestor's own attestation of it has less than this
   * left. Six hours before a one-day expiry: a provider never goes unattested while the attestor runs.
   */
  refreshBeforeExpirySeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(21_600),
  /**
   * After a failed challenge, a machine waits this long for the next one (scheduled or requested,
   * forced included; an in-lease check never waits), doubled for each further failure it holds in
   * its failure history, up to `maxRetryAfterFailureSeconds` (node/attest/challenge/failure-history.ts).
   */
  retryAfterFailureSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(300),
  /**
   * The longest wait after failures. With the defaults (300 s doubling to 6 h) a machine that fails
   * every try gets at most 10 challenges in any 24 hours (docs/attestation-threats.md, "Retrying").
   */
  maxRetryAfterFailureSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(21_600),
  /**
   * How long a failed challenge stays in the machine's failure history: it counts towards the wait
   * and is signed into the machine's attestations (`failures`, `lastFailureAt`) until then, whatever
   * passes after it. A week.
   */
  failureHistorySeconds: z
    .number()
    .int()
    .min(0)
    .max(90 * 86_400)
    .default(604_800),
  /**
   * Challenge requests (`/suanli/attest-request/1.0.0`) one requester (its Noise-authenticated peer
   * id) may have answered per hour, cached answers included; beyond it the request is refused
   * `backoff` with when to retry. A requested challenge never leads to a fault (docs/attestation.md,
   * "Requests from anyone").
   */
  requestsPerRequesterPerHour: z.number().int().min(1).max(3_600).default(30),
  /** Challenges in flight at once: each recomputes opened rows on this machine's CPU. */
  maxConcurrentChallenges: z.number().int().min(1).max(64).default(2),
  /** Challenge results kept per machine in the database (older ones are pruned). */
  keepResultsPerMachine: z.number().int().min(1).max(1_000).default(20),
  /**
   * Other attestors to exchange faults with, beyond the peers this node meets on the network that
   * serve the fault protocol. Trust never comes from this list: every signature is checked against
   * the on-chain attestor set.
   */
  peers: z.array(peerAddrSchema).max(64).default([]),
  /**
   * A GPU UUID that one machine named in a passed challenge may not be named for another machine
   * (any provider's) within this many seconds: the commit fails `duplicate_gpus` (docs/attestation.md,
   * "One GPU, one machine"). One day, the attestation's lifetime: while one machine's attestation
   * stands on a card, no other machine's can. 0 turns the check off.
   */
  gpuReuseWindowSeconds: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400)
    .default(86_400),
});
export type AttestorRoleOptions = z.output<typeof attestorRoleOptionsSchema>;
