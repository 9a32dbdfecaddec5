import { z } from "zod";

/**
 * In-lease capacity checks (docs/attestation.md, "In-lease checks"): an attestor challenges each
 * leased machine at random times, within the share of the lease its offer announces, and proposes
 * a capacity fault (kind 2) when the machine fails.
 */
export const leaseChecksOptionsSchema = z
  .strictObject({
    /** Challenge leased machines (needs `attest.liveness.enabled`: the lease tracker and the fault exchange). */
    enabled: z.boolean().default(true),
    /** How often the active leases are looked at for a check that is due. */
    tickMs: z.number().int().min(50).max(600_000).default(5_000),
    /** The cost assumed for a lease's first check, before one was measured (the budget counts measured durations). */
    assumedChallengeMs: z.number().int().min(100).max(600_000).default(15_000),
    /**
     * The share of each GPU an in-lease (light) check needs: its rows, and so its required rate,
     * are this share of a full challenge's in the same time, so an honest machine answers it while
     * the renter's task uses the rest. Its pass signs no attestation.
     */
    rateShare: z.number().min(0.05).max(1).default(0.25),
    /**
     * A light check that fails other than with wrong rows (slow, late, refused...) leads to a
     * capacity fault only when at least this many of the lease's last `failureWindow` light checks
     * by this attestor failed; wrong rows fault at once. The co-signer applies the same rule.
     */
    failuresToFault: z.number().int().min(1).max(100).default(3),
    failureWindow: z.number().int().min(1).max(100).default(4),
  })
  .refine((o) => o.failuresToFault <= o.failureWindow, {
    message: "attest.leaseChecks.failuresToFault must be at most attest.leaseChecks.failureWindow",
    path: ["failuresToFault"],
  });
export type LeaseChecksOptions = z.output<typeof leaseChecksOptionsSchema>;
