/**
 * Opening a task I/O stream to the provider of one lease: signs the renter's authorization of the
 * request (action and params, as for logs) and opens the protocol through the client's link.
 */
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import type { z } from "zod";
import type { TaskAttempt } from "../types.js";
import { TaskIoUnsupportedError } from "../errors.js";
import { authorize, type SuanliContext } from "./context.js";

export async function openTaskStream<S extends z.ZodType>(
  ctx: SuanliContext,
  attempt: TaskAttempt,
  protocol: string,
  action: "output" | "exec" | "forward",
  params: Record<string, unknown>,
  options: { responseSchema: S; maxFrameBytes: number; signal?: AbortSignal },
): Promise<{ answer: z.output<S>; lp: LengthPrefixedStream<Stream>; stream: Stream }> {
  if (!ctx.link.openStream) {
    throw new TaskIoUnsupportedError(`This client has no libp2p: ${action} needs a Node client (createClient with bootstrap, not nodeUrl)`);
  }
  const auth = await authorize(ctx, attempt, action, params);
  return ctx.link.openStream({ peerId: attempt.peerId, addrs: attempt.addrs }, protocol, { auth, params }, options);
}
