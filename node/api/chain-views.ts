/**
 * The chain's providers, machines and leases as the HTTP API shows them: pure conversions of
 * the contracts' records (common/chain/market.ts reads) into the API's views, and the bounded
 * paging of list requests that read the chain per item.
 */
import { getAddress, type Address, type Hex } from "viem";
import { uptimePercentOf, type LeaseView, type MachineView, type ProviderView } from "../../common/api/chain.js";
import type { LeaseView as ChainLease, readMachine, readProvider } from "../../common/chain/market.js";
import { GPU_MODELS, modelHash } from "../../common/gpu.js";
import type { Page, PageOf } from "./source.js";

/** Chain reads one list request runs at once. */
export const READ_CONCURRENCY = 16;

/** Canonical model name by on-chain hash (machines whose model has no live offer to name it). */
const MODEL_NAMES = new Map(GPU_MODELS.map((model) => [modelHash(model.name), model.name]));

export type ChainProvider = Awaited<ReturnType<typeof readProvider>>;
export type ChainMachine = Awaited<ReturnType<typeof readMachine>>;

export { mapBounded } from "../../common/concurrency.js";

export function paginate<T>(items: readonly T[], page: Page): PageOf<T> {
  return { items: items.slice(page.offset, page.offset + page.limit), total: items.length };
}

export function toLeaseView(lease: ChainLease): LeaseView | undefined {
  if (lease.status === "None") return undefined;
  return {
    id: lease.leaseId,
    renter: lease.renter,
    provider: lease.provider,
    machineId: lease.machineId,
    units: lease.units,
    pricePerUnitSecond: lease.pricePerUnitSecond,
    collateralBps: lease.collateralBps,
    deposit: lease.deposit,
    paid: lease.paid,
    accrued: lease.accrued,
    status: lease.status,
    interruptible: lease.interruptible,
    startDeadline: lease.startDeadline,
    activatedAt: lease.activatedAt || null,
    stopAt: lease.stopAt || null,
    end: lease.end || null,
  };
}

/** The live offer of a machine, when there is one: it names the model as the provider wrote it. */
export type MachineOffer = { key: string; model: Hex; modelName: string };

/** A machine's view: its registry record, named by its live offer (or the canonical name of its model hash). */
export function toMachineView(
  machine: ChainMachine,
  offer: MachineOffer | undefined,
  attestations: MachineView["attestations"],
  failures: Pick<MachineView, "attestFailures" | "lastAttestFailureAt"> = { attestFailures: 0, lastAttestFailureAt: null },
): MachineView {
  const model = offer && offer.model === machine.model ? offer.modelName : (MODEL_NAMES.get(machine.model) ?? null);
  return {
    machineId: machine.machineId,
    provider: getAddress(machine.owner),
    model,
    modelHash: machine.model.toLowerCase() as Hex,
    units: machine.units,
    vramMiB: machine.vramMiB,
    interconnect: machine.interconnectName,
    region: machine.region,
    cluster: machine.cluster.toLowerCase() as Hex,
    onDemandUnits: machine.onDemandUnits,
    interruptibleUnits: machine.interruptibleUnits,
    idleUnits: machine.idleUnits,
    attestations,
    offerKey: offer ? offer.key : null,
    attestFailures: failures.attestFailures,
    lastAttestFailureAt: failures.lastAttestFailureAt,
  };
}

/** A provider's view: its registry record and its machines (those that still exist). */
export function toProviderView(address: Address, record: ChainProvider, machines: readonly (MachineView | undefined)[]): ProviderView {
  return {
    address: getAddress(address),
    peerId: record.peerId,
    metadataURI: record.metadataURI,
    registered: record.registered,
    stake: record.stake,
    locked: record.locked,
    unbonding: record.unbonding,
    unlockAt: record.unlockAt > 0 ? record.unlockAt : null,
    freeStake: record.free,
    reputation: {
      leasesCompleted: Number(record.leasesCompleted),
      faults: Number(record.faults),
      unitSecondsDelivered: record.unitSecondsDelivered,
      uptimePercent: uptimePercentOf(record),
    },
    machines: machines.filter((machine): machine is MachineView => machine !== undefined),
  };
}
