import { z } from "zod";
import { dataEntrySchema, type DataEntryView } from "../../common/api/data.js";
import { cidSchema, dataAnswer, dataRequest, parseInput } from "../internal/data.js";

const pinDataSchema = z.strictObject({
  /** The node's HTTP API, e.g. http://127.0.0.1:8080 (its data routes answer only on the node's own machine). */
  nodeUrl: z.string().url(),
  /** The name kept with the pin (default: the CID). */
  name: z.string().min(1).max(200).optional(),
  /** Multiaddrs (ending in /p2p/<peer id>) of nodes known to have the data, for the node to dial. */
  providers: z.array(z.string().min(1).max(500)).max(16).optional(),
  /** How long the node waits for blocks it lacks, ms (default: its data.fetchTimeoutMs). */
  timeoutMs: z.number().int().min(100).max(86_400_000).optional(),
  /** Aborts the request. */
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
});

/**
 * What pinData takes: the node's API URL, and optionally the name kept with the pin, provider
 * hints, how long the node may wait for the data, and an AbortSignal.
 *
 * @example
 * import { pinData, type PinDataParameters } from "suanli/sdk";
 * const parameters: PinDataParameters = { nodeUrl: "http://127.0.0.1:8080", providers: ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW..."] };
 * await pinData("bafy...", parameters);
 */
export type PinDataParameters = z.input<typeof pinDataSchema>;

/**
 * The pinned root as the node lists it (`pinned: true`, its bytes on the node).
 *
 * @example
 * import { pinData, type PinDataReturnType } from "suanli/sdk";
 * const pinned: PinDataReturnType = await pinData("bafy...", { nodeUrl: "http://127.0.0.1:8080" });
 * console.log(pinned.cid, pinned.bytes);
 */
export type PinDataReturnType = DataEntryView;

/**
 * Has a node fetch data by its CID (over bitswap, from its peers and the `providers` given, every
 * block verified against its CID) and pin it, so that it outlives the node that made it: a
 * checkpoint or an output kept on the renter's own node past its provider's retention. Pinning a
 * root the node already pins answers it again. Refusals throw DataRequestError under the node's
 * error name (DataNotFoundError, DataQuotaError, ...). Node only; the node's API must be on the
 * same machine.
 *
 * @example
 * import { pinData } from "suanli/sdk";
 * const answer = await client.checkpoints(taskId);
 * const newest = answer.newest;
 * if (newest) await pinData(newest.record.cid, { nodeUrl: "http://127.0.0.1:8080", providers: answer.providerAddrs });
 */
export async function pinData(cid: string, parameters: PinDataParameters): Promise<PinDataReturnType> {
  const options = parseInput(pinDataSchema, parameters, "pinData parameters");
  const root = parseInput(cidSchema, cid, "CID");
  const body = JSON.stringify({ cid: root, name: options.name, providers: options.providers, timeoutMs: options.timeoutMs });
  const response = await dataRequest(options.nodeUrl, "/v1/data/pins", { method: "POST", headers: { "content-type": "application/json" }, body, signal: options.signal });
  return dataAnswer(response, dataEntrySchema, "POST /v1/data/pins");
}
