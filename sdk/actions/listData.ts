import { z } from "zod";
import { dataListSchema, type DataList } from "../../common/api/data.js";
import { dataAnswer, dataRequest, parseInput } from "../internal/data.js";

export const dataNodeSchema = z.strictObject({
  /** The node's HTTP API, e.g. http://127.0.0.1:8080 (its data routes answer only on the node's own machine). */
  nodeUrl: z.string().url(),
  /** Aborts the request. */
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
});

/**
 * What listData and removeData take: the node's API URL and optionally an AbortSignal.
 *
 * @example
 * import { listData, type DataNodeParameters } from "suanli/sdk";
 * const parameters: DataNodeParameters = { nodeUrl: "http://127.0.0.1:8080" };
 * const { items } = await listData(parameters);
 */
export type DataNodeParameters = z.input<typeof dataNodeSchema>;

/**
 * What a node holds: pinned roots (added; kept) and cached ones (fetched for tasks or downloads;
 * evicted least recently used first), newest first, with the totals against its caps.
 *
 * @example
 * import { listData, type ListDataReturnType } from "suanli/sdk";
 * const list: ListDataReturnType = await listData({ nodeUrl: "http://127.0.0.1:8080" });
 * console.log(`${list.pinnedBytes} of ${list.pinnedLimitBytes} bytes pinned`);
 */
export type ListDataReturnType = DataList;

/**
 * Lists the data a node pins and caches.
 *
 * @example
 * import { listData } from "suanli/sdk";
 * const { items } = await listData({ nodeUrl: "http://127.0.0.1:8080" });
 * for (const item of items) console.log(item.cid, item.name, item.bytes, item.pinned ? "pinned" : "cached");
 */
export async function listData(parameters: DataNodeParameters): Promise<ListDataReturnType> {
  const options = parseInput(dataNodeSchema, parameters, "listData parameters");
  const response = await dataRequest(options.nodeUrl, "/v1/data", { signal: options.signal });
  return dataAnswer(response, dataListSchema, "GET /v1/data");
}
