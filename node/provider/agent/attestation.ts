/**
 * The provider's side of attestation inside the agent: answers attestors' proof-of-capacity
 * challenges with the configured runner and their liveness probes for the agent's active
 * leases, and keeps each machine's current attestations (the newest per attestor, unexpired, at
 * most 8) in its offers.
 */
import { verifyAttestation } from "../../../common/attest/attestation.js";
import type { SignedAttestation } from "../../../common/offers/message.js";
import { createRunner } from "../../attest/create.js";
import { mountProviderAttestation } from "../../attest/provider-service.js";
import type { Daemon, DaemonModule } from "../../daemon.js";
import type { Logger } from "../../log/logger.js";
import type { ProviderLease } from "../../attest/challenge/index.js";
import type { LeaseRecord } from "./records.js";
import type { DeclaredMachine } from "./setup.js";

const MAX_ATTESTATIONS_PER_OFFER = 8;

export async function startProviderAttestation(
  daemon: Daemon,
  parts: {
    machines: readonly DeclaredMachine[];
    setAttestations: (machineId: number, attestations: SignedAttestation[]) => void;
    holdsLease: (leaseId: bigint) => boolean;
    /** The agent's lease table: heartbeats are signed for its active leases, and each active lease's check budget is counted. */
    records: { get(leaseId: bigint): LeaseRecord | undefined; open(): LeaseRecord[] };
    /** The in-lease check share the agent's offers announce (`leaseChecks.shareBps`, provider.terms.leaseCheckShareBps). */
    leaseCheckShareBps: number;
    logger: Logger;
  },
): Promise<DaemonModule> {
  const runner = createRunner(daemon.config.attest.runner, parts.logger.child({ part: "attest-runner" }));
  const current = new Map<number, Map<string, SignedAttestation>>();
  const now = () => Math.floor(Date.now() / 1000);

  const onAttestation = async (machineId: number, signed: SignedAttestation) => {
    // The responder already checked it against the on-chain attestor set; this only names the signer.
    const verdict = await verifyAttestation(signed, { domain: daemon.domain, isAttestor: () => true, now: now() });
    if (!verdict.valid) return;
    const held = current.get(machineId) ?? new Map<string, SignedAttestation>();
    held.set(verdict.attestor.toLowerCase(), signed);
    for (const [attestor, kept] of held) if (kept.attestation.expiry <= now()) held.delete(attestor);
    const newest = [...held.entries()].sort(([, a], [, b]) => b.attestation.issuedAt - a.attestation.issuedAt).slice(0, MAX_ATTESTATIONS_PER_OFFER);
    current.set(machineId, new Map(newest));
    parts.setAttestations(
      machineId,
      newest.map(([, kept]) => kept),
    );
    parts.logger.info("Machine attested", { machineId, attestor: verdict.attestor, expiry: signed.attestation.expiry });
  };

  const mounted = await mountProviderAttestation(daemon, {
    runner,
    machines: parts.machines.map(({ machineId, model, units, vramMiB }) => ({ machineId, model, units, vramMiB })),
    onAttestation,
    holdsLease: parts.holdsLease,
    // One check budget per active lease of the machine (issue 35 item 8), counted from when this
    // node saw the lease activated at the share its offers announce.
    leaseOf: (machineId) => activeLeases(parts.records.open(), machineId, parts.leaseCheckShareBps),
  });
  return {
    name: "provider-attestation",
    async stop() {
      await mounted.stop();
      await runner.close();
    },
  };
}

/** The machine's active leases as the challenge responder counts their check budgets. */
export function activeLeases(records: readonly LeaseRecord[], machineId: number, shareBps: number): ProviderLease[] {
  return records
    .filter((record) => record.machineId === machineId && record.chain.status === "Active")
    .map((record) => ({ leaseId: record.leaseId, activatedAtMs: record.activatedWallMs ?? record.chain.activatedAt * 1000, shareBps }));
}
