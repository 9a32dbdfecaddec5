/**
 * Asking an attestor to challenge a machine now, over `/suanli/attest-request/1.0.0`: a provider
 * that just registered (or restarted) gets its attestation without waiting for the attestor's
 * schedule, and an operator can test a machine by hand (`npx suanli attestor challenge`). The answer
 * is the outcome; a still-fresh earlier result comes back at once (`cached: true`).
 */
import type { Libp2p, PeerId } from "@libp2p/interface";
import type { Multiaddr } from "@multiformats/multiaddr";
import { ATTEST_REQUEST_PROTOCOL } from "../p2p/protocols.js";
import { request } from "../p2p/reqresp.js";
import { challengeOutcomeSchema, challengeRequestSchema, type ChallengeOutcomeMessage } from "./wire.js";

/** Long enough for a gpu-preset challenge (deadline × cutoff factor plus the open timeout) and the attestor's queue. */
export const DEFAULT_CHALLENGE_REQUEST_TIMEOUT_MS = 180_000;

/**
 * @example
 * import { multiaddr } from "@multiformats/multiaddr";
 * import { requestChallenge } from "suanli/common/attest/request";
 * const outcome = await requestChallenge(host, multiaddr("/ip4/10.0.0.5/tcp/4001/p2p/12D3KooW..."), { chainId: 31337, machineId: 7 });
 * if (outcome.outcome === "pass") offers.addAttestation(7, outcome.attestation);
 */
export function requestChallenge(
  host: Pick<Libp2p, "dialProtocol">,
  attestor: PeerId | Multiaddr,
  body: { chainId: number; machineId: number; force?: boolean },
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<ChallengeOutcomeMessage> {
  return request(
    host,
    attestor,
    ATTEST_REQUEST_PROTOCOL,
    { v: 1, ...body },
    {
      requestSchema: challengeRequestSchema,
      responseSchema: challengeOutcomeSchema,
      timeoutMs: options.timeoutMs ?? DEFAULT_CHALLENGE_REQUEST_TIMEOUT_MS,
      maxMessageBytes: 8 * 1024,
      signal: options.signal,
    },
  );
}
