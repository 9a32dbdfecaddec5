/** `npm run demo`: the whole market on this machine, then it stops by itself. */
import { runDemo } from "./demo.js";

const keep = process.argv.includes("--keep");
runDemo({ keep }).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`Demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
