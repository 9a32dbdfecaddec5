/**
 * The demo's workloads: a real task (a small computation that prints its progress and writes a
 * result to output/), an interruptible batch job, and the idle workload providers run on free GPUs.
 */

/** The job: counts primes with a sieve and estimates pi, printing as it goes. Runs on any Node. */
const JOB = `// Suanli demo job: an honest little computation.
const limit = Number(process.env.PRIME_LIMIT || 2000000);
const steps = Number(process.env.STEPS || 5);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fs = require("fs");
(async () => {
  console.log("job: counting primes below " + limit + " on GPUs " + (process.env.CUDA_VISIBLE_DEVICES || "(none)"));
  const sieve = new Uint8Array(limit + 1);
  let count = 0;
  for (let i = 2; i <= limit; i++) {
    if (sieve[i]) continue;
    count++;
    for (let j = i * i; j <= limit; j += i) sieve[j] = 1;
  }
  console.log("job: " + count + " primes below " + limit);
  let inside = 0;
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const samples = 400000;
  for (let step = 1; step <= steps; step++) {
    for (let k = 0; k < samples; k++) {
      const x = rand(), y = rand();
      if (x * x + y * y <= 1) inside++;
    }
    console.log("job: step " + step + "/" + steps + " pi ~ " + (4 * inside / (samples * step)).toFixed(5));
    await sleep(Number(process.env.STEP_MS || 300));
  }
  const result = { primesBelow: limit, primes: count, pi: Number((4 * inside / (samples * steps)).toFixed(5)) };
  fs.mkdirSync("output", { recursive: true });
  fs.writeFileSync("output/result.json", JSON.stringify(result) + "\\n");
  console.log("job: result " + JSON.stringify(result));
})();
`;

/** A long-running job for interruptible capacity: prints a tick per second until stopped. */
const BATCH = `let n = 0;
process.on("SIGTERM", () => { console.log("batch: SIGTERM after " + n + " ticks, checkpointing and exiting"); process.exit(143); });
console.log("batch: interruptible batch job started");
setInterval(() => console.log("batch: tick " + ++n), 1000);
`;

/** The providers' idle workload: a low-priority background job (a stand-in for mining or batch work). */
export const IDLE_WORKLOAD_SCRIPT = `process.on("SIGTERM", () => { console.log("idle workload: stopping (GPUs leased)"); process.exit(0); });
console.log("idle workload: running on free GPUs");
setInterval(() => {}, 60000);
`;

/** The demo's task files: the job and the interruptible batch job, for the bundle server. */
export const DEMO_JOB_FILES = { "job.js": JOB };
export const DEMO_BATCH_FILES = { "batch.js": BATCH };
