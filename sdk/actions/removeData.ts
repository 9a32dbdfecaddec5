import { dataRemovedSchema, type DataRemoved } from "../../common/api/data.js";
import { cidSchema, dataAnswer, dataRequest, parseInput } from "../internal/data.js";
import { dataNodeSchema, type DataNodeParameters } from "./listData.js";

/**
 * What removeData answers: the CID and what was removed (`pinned`: the pin; `cached`: a cached copy).
 *
 * @example
 * import { removeData, type RemoveDataReturnType } from "suanli/sdk";
 * const removed: RemoveDataReturnType = await removeData("bafy...", { nodeUrl: "http://127.0.0.1:8080" });
 * console.log(removed.removed); // "pinned"
 */
export type RemoveDataReturnType = DataRemoved;

/**
 * Unpins a root on a node (or drops its cached copy); the node deletes the blocks nothing else
 * pins or caches. A CID the node does not hold throws DataRequestError named DataNotHeldError.
 *
 * @example
 * import { removeData } from "suanli/sdk";
 * await removeData("bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", { nodeUrl: "http://127.0.0.1:8080" });
 */
export async function removeData(cid: string, parameters: DataNodeParameters): Promise<RemoveDataReturnType> {
  const options = parseInput(dataNodeSchema, parameters, "removeData parameters");
  const root = parseInput(cidSchema, cid, "CID");
  const route = `/v1/data/${root}`;
  const response = await dataRequest(options.nodeUrl, route, { method: "DELETE", signal: options.signal });
  return dataAnswer(response, dataRemovedSchema, `DELETE ${route}`);
}
