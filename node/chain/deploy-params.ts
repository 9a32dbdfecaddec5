import { zeroAddress, type Address } from "viem";

/** Governance parameters set at deployment (all changeable later by governance, through the timelock when there is one). */
export type DeployParams = {
  /** Seconds between an unstake request and its withdrawal. */
  unbondingDelay: number;
  /** Distinct attestor signatures a fault needs (the floor under faultQuorumBps). */
  faultQuorum: number;
  /** The fault quorum as a share of the attestor set, basis points: 0 (the floor alone), or 3,334 to 10,000. */
  faultQuorumBps: number;
  /** Share of every provider payment to the treasury, basis points (at most 1,000). */
  protocolFeeBps: number;
  /** Share of the collateral a renter gets when the provider misses the start deadline, basis points. */
  startPenaltyBps: number;
  /** Lowest share of the collateral a quorum fault credits to the renter, basis points. */
  faultMinCreditBps: number;
  /** Seconds a preempted interruptible lease keeps running. */
  preemptionNotice: number;
  /** Receives the protocol fee; zero while the fee is zero. */
  treasury: Address;
  /** AttestorStaking: active stake an attestor needs to count (base units of the token). */
  attestorMinStake: bigint;
  /** AttestorStaking: taken from an attestor per lost dispute. */
  attestorSlashAmount: bigint;
  /** AttestorStaking: what a disputer bonds. */
  attestorDisputeFee: bigint;
  /** AttestorStaking: seconds an attestor has to answer a dispute (at least 600). */
  attestorAnswerWindow: number;
  /** AttestorStaking: seconds an attestor's unstaked tokens stay slashable (at least the answer window). */
  attestorUnbondingDelay: number;
  /** AttestorStaking: share of a slash paid to the disputer, basis points (at most 5,000; the rest to the sink). */
  attestorDisputerShareBps: number;
  /** AttestorStaking: seconds of silence an attestor waits before signing a liveness fault (1..86,400); its receipt within them after observedAt slashes it (disputeFault). */
  attestorFaultWindow: number;
};

const TOKEN = 10n ** 6n;
const DAY = 86_400;

/**
 * Devnet defaults: short delays so a demo or a test sees unbonding and preemption happen within a
 * minute; one attestor suffices for a fault. The deployer stays governance (no timelock).
 */
export const DEVNET_PARAMS: DeployParams = {
  unbondingDelay: 60,
  faultQuorum: 1,
  faultQuorumBps: 0,
  protocolFeeBps: 0,
  startPenaltyBps: 1_000,
  faultMinCreditBps: 2_000,
  preemptionNotice: 30,
  treasury: zeroAddress,
  attestorMinStake: 1_000n * TOKEN,
  attestorSlashAmount: 500n * TOKEN,
  attestorDisputeFee: 10n * TOKEN,
  attestorAnswerWindow: 600,
  attestorUnbondingDelay: 600,
  attestorDisputerShareBps: 5_000,
  // The attestors' default QoS window (node/attest/faults/options.ts qosWindowSeconds).
  attestorFaultWindow: 30,
};

/**
 * The production column of docs/contracts.md ("Governance parameters"): a week of unbonding, two thirds of the
 * attestor set (at least 2) for a fault, two minutes of preemption notice, no fee until governance decides one.
 * An attestor stakes 10,000 tokens and loses all of it per lost dispute, so a quorum's stake exceeds what a false
 * pass or a false fault earns on any one lease; a disputer bonds 5 tokens (an answer's gas, many times over).
 */
export const PRODUCTION_PARAMS: DeployParams = {
  unbondingDelay: 7 * DAY,
  faultQuorum: 2,
  faultQuorumBps: 6_667,
  protocolFeeBps: 0,
  startPenaltyBps: 1_000,
  faultMinCreditBps: 2_000,
  preemptionNotice: 120,
  treasury: zeroAddress,
  attestorMinStake: 10_000n * TOKEN,
  attestorSlashAmount: 10_000n * TOKEN,
  attestorDisputeFee: 5n * TOKEN,
  attestorAnswerWindow: DAY,
  attestorUnbondingDelay: 14 * DAY,
  attestorDisputerShareBps: 5_000,
  // The attestors' QoS window; never above it (docs/attestation.md).
  attestorFaultWindow: 30,
};

/** Parameter sets selectable by name (`npm run deploy -- --params production`). */
export const PARAMS_PRESETS = { devnet: DEVNET_PARAMS, production: PRODUCTION_PARAMS } as const;
export type ParamsPreset = keyof typeof PARAMS_PRESETS;

/**
 * The timelock delay of a production deployment: 8 days, one more than the providers' unbonding delay, so a
 * provider who sees a hostile proposal scheduled can request its unstake and withdraw its free stake before the
 * proposal can run (docs/contracts.md, "Roles and the timelock").
 */
export const PRODUCTION_TIMELOCK_DELAY_SECONDS = 8 * DAY;

/** The sink of the attestors' slashes (what the disputer does not get) when neither a treasury nor a timelock is set: a burn address. */
export const DEVNET_SLASH_SINK: Address = "0x000000000000000000000000000000000000dEaD";
