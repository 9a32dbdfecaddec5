/**
 * The process's one signal waiter, for every long-running command (a node, the devnet, a port
 * forward): the first SIGINT or SIGTERM asks for a clean stop; a second SIGINT while stopping
 * exits at once.
 */

/**
 * Resolves with the first SIGINT or SIGTERM; a second SIGINT after it exits the process (code
 * 130) without waiting for the clean stop.
 *
 * @example
 * import { waitForShutdown } from "./signals.js";
 * const signal = await waitForShutdown();
 * await server.close();
 */
export function waitForShutdown(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      process.once("SIGINT", () => process.exit(130));
      resolve(signal);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}
