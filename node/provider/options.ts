/**
 * The provider's config section (`provider.*`), documented key by key in docs/configuration.md.
 * Defaults are chosen for a GPU server run by an operator: nvidia-smi inventory, the process
 * runtime sandboxed with bubblewrap where installed, generous bundle caps, 10 s to stop a task.
 */
import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../../common/gpu.js";
import { interconnectSchema } from "../../common/offers/message.js";
import { DEFAULT_LEASE_CHECK_SHARE_BPS, leaseChecksSchema } from "../../common/attest/lease-checks.js";
import { claimsOptionsSchema } from "./agent/claims-options.js";
import { declaredMachineSchema } from "./inventory/inventory.js";
import { pricingOptionsSchema } from "./pricing/options.js";
import { leaseBoundsSchema } from "./runtime/lease-bounds.js";
import { isCidr } from "./runtime/network-policy.js";
import { DEFAULT_TASK_USER, TASK_USER_PATTERN } from "./runtime/task-user.js";

const GiB = 1024 ** 3;

/**
 * A price for one unit (a GPU or a MIG slice) of a model. Exactly one of:
 * - `usdPerGpuHour`: US dollars per unit-hour, converted to base units of the settlement token
 *   (a 6-decimal stablecoin) per unit-second: round(usd × 10^6 / 3600);
 * - `pricePerUnitSecond`: base units of the settlement token per unit-second, as on-chain.
 */
export const priceSchema = z.union([
  z.strictObject({ usdPerGpuHour: z.number().positive().max(1_000_000) }),
  z.strictObject({
    pricePerUnitSecond: z
      .union([z.string().regex(/^[1-9]\d{0,28}$/, "expected a positive decimal integer"), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)])
      .transform((value) => BigInt(value))
      .refine((value) => value < 2n ** 96n, { message: "must fit in uint96" }),
  }),
]);
export type PriceInput = z.output<typeof priceSchema>;

const cidrSchema = z.string().max(64).refine(isCidr, { message: 'expected an IP address or CIDR range such as "10.20.0.0/16"' });

const envNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected an environment variable name");
const positiveInt = (max: number) => z.number().int().positive().max(max);

export const idleWorkloadSchema = z.strictObject({
  /** What runs on idle units: a string through /bin/sh -c, or an argv. Gets CUDA_VISIBLE_DEVICES of its units. */
  command: z.union([
    z
      .string()
      .min(1)
      .max(16 * 1024),
    z
      .array(z.string().max(16 * 1024))
      .min(1)
      .max(256),
  ]),
  /** Extra environment (the idle workload gets only PATH, HOME, LANG of the node besides). */
  env: z.record(envNameSchema, z.string().max(32 * 1024)).default({}),
  cwd: z.string().min(1).optional(),
  /** `unit`: one process per idle unit; `machine`: one process over all idle units. */
  scope: z.enum(["unit", "machine"]).default("unit"),
  restartDelayMs: z.number().int().min(10).max(600_000).default(1_000),
  maxRestartDelayMs: z.number().int().min(10).max(3_600_000).default(60_000),
});

/** A whole-token amount as a decimal string ("100", "2.5"), converted with the token's decimals at start. */
const tokenAmountSchema = z
  .union([z.string().regex(/^\d{1,20}(\.\d{1,18})?$/, 'expected a decimal number of tokens such as "100" or "2.5"'), z.number().nonnegative().max(1e15)])
  .transform((value) => String(value));

/** A model-keyed price table (prices, interruptible floors). */
const priceTableSchema = z
  .record(
    z
      .string()
      .max(64)
      .refine((key) => canonicalGpuName(key) !== undefined),
    priceSchema,
    { error: (issue) => (issue.code === "invalid_key" ? `unknown GPU model; known: ${knownGpuNames().join(", ")} (MIG slices as <model>/<profile>)` : undefined) },
  )
  .default({})
  .transform((prices) => Object.fromEntries(Object.entries(prices).map(([key, value]) => [canonicalGpuName(key)!, value])));

export const providerOptionsSchema = z.strictObject({
  inventory: z
    .strictObject({
      /** `nvidia-smi` / `amd-smi` / `rocm-smi`: probe the GPUs; `declared`: use `declared` (machines without those tools). */
      source: z.enum(["nvidia-smi", "amd-smi", "rocm-smi", "declared"]).default("nvidia-smi"),
      nvidiaSmiPath: z.string().min(1).default("nvidia-smi"),
      amdSmiPath: z.string().min(1).default("amd-smi"),
      rocmSmiPath: z.string().min(1).default("rocm-smi"),
      commandTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
      /** Placement of the probed machine, as registered on-chain. */
      region: z.string().min(1).max(32).default("unknown"),
      interconnect: interconnectSchema.default("none"),
      declared: z.array(declaredMachineSchema).max(64).default([]),
    })
    .prefault({})
    .superRefine((inventory, ctx) => {
      if (inventory.source === "declared" && inventory.declared.length === 0) {
        ctx.addIssue({ code: "custom", path: ["declared"], message: 'at least one machine is required when source is "declared"' });
      }
    }),
  /** Price per unit of each model, keyed by model name or alias (MIG slices as `<model>/<profile>`). */
  prices: priceTableSchema,
  /**
   * Lowest interruptible bid per unit of each model (same forms as prices). A model without an
   * entry sells no interruptible capacity.
   */
  minBids: priceTableSchema,
  /** How prices move with demand, the network's index and the idle workload's earnings (pricing/options.ts). */
  pricing: pricingOptionsSchema,
  /** Registration and stake on-chain (docs/provider.md, "Setup"). */
  chain: z
    .strictObject({
      /** Register the wallet (and fix a changed peer id) at start; false: fail when not registered. */
      autoRegister: z.boolean().default(true),
      /** The profile's metadata URI (at most 256 bytes). */
      metadataURI: z.string().max(256).default(""),
      /** Stake (free + locked, in whole tokens) the node tops up to at start from the wallet; it refuses to start below it. */
      stakeTarget: tokenAmountSchema.default("100"),
    })
    .prefault({}),
  /** Terms of every offer this node signs. */
  terms: z
    .strictObject({
      /** Collateral locked per lease, in basis points of its deposit. */
      collateralBps: z.number().int().min(0).max(10_000).default(1_000),
      /**
       * Share of a lease's elapsed time (basis points, 10..1000) that each attestor's in-lease
       * capacity checks may take, announced with every offer and paid by the provider
       * (docs/attestation.md, "In-lease checks").
       */
      leaseCheckShareBps: leaseChecksSchema.shape.shareBps.default(DEFAULT_LEASE_CHECK_SHARE_BPS),
      /** Seconds after a lease opens by which the node must activate it. */
      startWindowSeconds: z.number().int().min(10).max(86_400).default(300),
      minDurationSeconds: z
        .number()
        .int()
        .min(1)
        .max(2 ** 32 - 1)
        .default(60),
      maxDurationSeconds: z
        .number()
        .int()
        .min(1)
        .max(2 ** 32 - 1)
        .default(7 * 86_400),
      /**
       * Reserved terms: each tier is an offer of its own beside the on-demand one, for leases of
       * at least `minDurationSeconds` (up to `maxDurationSeconds`, default the on-demand maximum)
       * at `discountBps` under the price (docs/provider.md, "Reserved terms").
       */
      tiers: z
        .array(
          z.strictObject({
            minDurationSeconds: z
              .number()
              .int()
              .min(2)
              .max(2 ** 32 - 1),
            maxDurationSeconds: z
              .number()
              .int()
              .min(2)
              .max(2 ** 32 - 1)
              .optional(),
            discountBps: z.number().int().min(1).max(9_999),
          }),
        )
        .max(8)
        .default([]),
    })
    .prefault({})
    .refine((terms) => terms.minDurationSeconds <= terms.maxDurationSeconds, {
      message: "minDurationSeconds must not exceed maxDurationSeconds",
      path: ["minDurationSeconds"],
    })
    .superRefine((terms, ctx) => {
      terms.tiers.forEach((tier, i) => {
        const previous = terms.tiers[i - 1];
        const max = tier.maxDurationSeconds ?? terms.maxDurationSeconds;
        if (tier.minDurationSeconds <= (previous?.minDurationSeconds ?? terms.minDurationSeconds)) {
          ctx.addIssue({
            code: "custom",
            path: ["tiers", i, "minDurationSeconds"],
            message: `must exceed ${previous ? "the previous tier's" : "terms.minDurationSeconds"} (${previous?.minDurationSeconds ?? terms.minDurationSeconds}): tiers are listed from the shortest`,
          });
        }
        if (max < tier.minDurationSeconds)
          ctx.addIssue({ code: "custom", path: ["tiers", i, "maxDurationSeconds"], message: `must be at least the tier's minDurationSeconds (${tier.minDurationSeconds})` });
        if (previous && tier.discountBps < previous.discountBps) {
          ctx.addIssue({
            code: "custom",
            path: ["tiers", i, "discountBps"],
            message: `must be at least the previous tier's (${previous.discountBps}): a longer commitment never costs more`,
          });
        }
      });
    }),
  /** The reserve protocol: how long units are held for a renter's open transaction. */
  reserve: z
    .strictObject({
      holdSeconds: z.number().int().min(5).max(3_600).default(120),
      /** Holds in flight at once; more requests are refused as "busy". */
      maxHolds: z.number().int().min(1).max(100_000).default(256),
      /**
       * Live holds one renter wallet may have here at once; their deposits together must also fit
       * its token balance. A hold costs nothing, so without a cap one wallet could hold every unit.
       */
      maxHoldsPerRenter: z.number().int().min(1).max(10_000).default(4),
      /** Live holds requested by one libp2p peer (an HTTP relay node sends for many wallets). */
      maxHoldsPerPeer: z.number().int().min(1).max(100_000).default(64),
      /**
       * Holds that expire without a lease count against their wallet and peer for `windowSeconds`;
       * past the limit new reserve requests from them are refused ("busy") until old ones age out.
       */
      unopened: z
        .strictObject({
          limit: z.number().int().min(1).max(10_000).default(5),
          peerLimit: z.number().int().min(1).max(100_000).default(50),
          windowSeconds: z
            .number()
            .int()
            .min(60)
            .max(7 * 86_400)
            .default(3_600),
        })
        .prefault({}),
    })
    .prefault({}),
  /** Lease handling. */
  leases: z
    .strictObject({
      /** An Open lease still without a task spec this close to its start deadline is activated anyway (the renter has the units and pays for them). */
      activateMarginSeconds: z.number().int().min(1).max(3_600).default(30),
      /** After a renter's cancel, the renter has this long to close the lease before the node completes it. */
      cancelGraceSeconds: z.number().int().min(0).max(86_400).default(30),
      /** How often every lease is checked against the chain (deadlines, grace periods, missed events). */
      reconcileIntervalMs: z.number().int().min(50).max(600_000).default(5_000),
    })
    .prefault({}),
  /** Claiming accrued payments. */
  claims: claimsOptionsSchema.prefault({}),
  /** How often GPU metrics are sampled for the metrics endpoint (nvidia-smi inventories). */
  metricsSampleMs: z.number().int().min(100).max(3_600_000).default(15_000),
  idle: idleWorkloadSchema.optional(),
  /** Idle power: GPUs with no task and no idle workload run at a lower power limit (power/idle-power.ts). */
  power: z
    .strictObject({
      /** Lower idle GPUs' power limits when no idle workload is configured (probed inventories only). */
      idleLimit: z.boolean().default(true),
      /** The idle limit as a percentage of the GPU's normal limit (never under its minimum). */
      idleLimitPercent: z.number().int().min(10).max(100).default(40),
      /** The idle limit in watts, instead of the percentage. */
      idleLimitWatts: z.number().int().min(10).max(5_000).optional(),
    })
    .prefault({}),
  runtime: z
    .strictObject({
      kind: z.enum(["process", "container"]).default("process"),
      /**
       * `auto` and `bubblewrap`: tasks run in bubblewrap, and the node refuses to start where it does
       * not work; `none`: tasks run unsandboxed as the node's user (development only; the node warns
       * at every start). Never a silent fallback.
       */
      sandbox: z.enum(["auto", "bubblewrap", "none"]).default("auto"),
      bwrapPath: z.string().min(1).default("bwrap"),
      /**
       * Outbound network for tasks. Under bubblewrap a task always has its own network namespace;
       * with this on, pasta connects it to public addresses only (see networkAllow).
       */
      network: z.boolean().default(true),
      pastaPath: z.string().min(1).default("pasta"),
      /** What a task may reach beyond public addresses (bubblewrap runtime). */
      networkAllow: z
        .strictObject({
          /** Host loopback TCP ports a task reaches at 127.0.0.1:<port> (a local model server, a cache). */
          loopbackPorts: z.array(z.number().int().min(1).max(65_535)).max(64).default([]),
          /** Private, link-local or reserved IPv4 ranges a task may reach ("10.20.0.0/16"). */
          networks: z.array(cidrSchema).max(64).default([]),
        })
        .prefault({}),
      /** More host paths visible read-only in the sandbox (an interpreter outside /usr, datasets). */
      readOnlyPaths: z.array(z.string().regex(/^\//, "expected an absolute path")).max(64).default([]),
      /** Base of the unprivileged host users a root node runs tasks as, one per running task (`<taskUser>-<slot>`, runtime/task-user-slots.ts), created when missing. */
      taskUser: z.string().regex(TASK_USER_PATTERN, "expected a user name of at most 28 characters (lowercase letters, digits, _ and -)").default(DEFAULT_TASK_USER),
      containerEngine: z.enum(["auto", "docker", "podman"]).default("auto"),
      /**
       * Container runtime: the OCI runtime the engine runs containers with. `auto` takes the
       * engine's default when it starts the self-test container, else runc, else crun (and says so
       * once); a name ("runc") or an absolute path uses that one only.
       */
      ociRuntime: z
        .string()
        .regex(/^(auto|[A-Za-z0-9_.-]{1,64}|\/[^\0\n]{1,4095})$/, 'expected "auto", a runtime name like "runc", or an absolute path')
        .default("auto"),
      /**
       * Container runtime: extra engine flags an operator needs (`["--shm-size", "8g"]`), added to
       * every task's container and to the self-test. They may weaken isolation (`--privileged`,
       * `--network host`, volumes): that is the operator's decision, and the node warns at start.
       */
      containerArgs: z
        .array(
          z
            .string()
            .min(1)
            .max(4_096)
            .regex(/^[^\0\r\n]*$/, "expected one argument without line breaks"),
        )
        .max(64)
        .default([])
        .superRefine((args, ctx) => {
          args.forEach((arg, index) => {
            if (/^(--name|--rm|-d|--detach|--attach|-a|--init-path|--label|-l)(=|$)/.test(arg)) {
              ctx.addIssue({ code: "custom", path: [index], message: `${arg.split("=")[0]} is set by the node itself and cannot be given here` });
            }
          });
        }),
      /**
       * Container runtime: pass the leased GPUs to the container (`auto`: CDI devices for Podman,
       * --gpus for Docker, /dev/kfd + render nodes for AMD); `none` for machines without GPUs
       * (declared test inventories).
       */
      containerGpus: z.enum(["auto", "none"]).default("auto"),
      /** Per-lease CPU, memory, process and /tmp bounds for both runtimes (runtime/lease-bounds.ts). */
      bounds: leaseBoundsSchema,
      /** Container runtime: cgroup limits per leased unit, multiplied by the task's units (over bounds). */
      containerPerUnit: z
        .strictObject({
          /** CPUs (`--cpus`, fractional allowed). */
          cpus: z.number().positive().max(4_096).optional(),
          /** Memory (`--memory`), bytes. */
          memoryBytes: positiveInt(Number.MAX_SAFE_INTEGER).optional(),
          /** Processes and threads (`--pids-limit`); default limits.processes for the whole task. */
          pids: positiveInt(10_000_000).optional(),
        })
        .prefault({}),
      /**
       * Most bytes the container runtime's cached images (pulled and loaded) may take together;
       * over it the least recently used ones no task is using are removed.
       */
      imageCacheBytes: positiveInt(1024 * 1024 * GiB).default(100 * GiB),
      /** Registries (host:port) the container runtime pulls from without TLS verification (Podman's --tls-verify=false). */
      insecureRegistries: z
        .array(z.string().regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/, "expected a registry host[:port]"))
        .max(64)
        .default([]),
    })
    .prefault({}),
  limits: z
    .strictObject({
      bundleMaxBytes: positiveInt(1024 * GiB).default(2 * GiB),
      bundleFetchTimeoutMs: positiveInt(24 * 3_600_000).default(600_000),
      unpackedMaxBytes: positiveInt(4096 * GiB).default(8 * GiB),
      bundleMaxEntries: positiveInt(10_000_000).default(100_000),
      /** RLIMIT_AS (address space). Leave unset for CUDA tasks, which reserve huge virtual ranges. */
      memoryBytes: positiveInt(Number.MAX_SAFE_INTEGER).optional(),
      /** RLIMIT_CPU per process, seconds. */
      cpuSeconds: positiveInt(10_000_000).optional(),
      /** RLIMIT_FSIZE: largest file a task may write. */
      fileSizeBytes: positiveInt(Number.MAX_SAFE_INTEGER).optional(),
      /** RLIMIT_NPROC (per user id; not enforced for root). */
      processes: positiveInt(10_000_000).optional(),
      /** RLIMIT_NOFILE. */
      openFiles: positiveInt(10_000_000).default(65_536),
      /** Log lines held per task for late readers. */
      logLines: positiveInt(1_000_000).default(10_000),
      logLineChars: positiveInt(1_048_576).default(16_384),
    })
    .prefault({}),
  /**
   * Task outputs (the task's `output/` folder) kept for the renter to download after the task
   * ends (docs/provider.md, "Task I/O"). Over `maxBytes` an output is not kept (the renter's
   * download says so); when the quota is full the oldest kept outputs go first.
   */
  outputs: z
    .strictObject({
      /** How long an output stays downloadable after its task ended (default 24 h). */
      retentionSeconds: z
        .number()
        .int()
        .min(0)
        .max(90 * 86_400)
        .default(86_400),
      /** Largest output folder kept per lease, bytes (default 10 GiB). */
      maxBytes: positiveInt(Number.MAX_SAFE_INTEGER).default(10 * GiB),
      /** All kept outputs together at most, bytes (default 100 GiB). */
      quotaBytes: positiveInt(Number.MAX_SAFE_INTEGER).default(100 * GiB),
      /** Where outputs are kept; default `<dataDir>/outputs`. Best on the workspaces' filesystem (a rename, not a copy). */
      dir: z.string().min(1).optional(),
    })
    .prefault({}),
  /** `exec`: commands a renter runs inside its running task. */
  exec: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** Longest an exec may run, seconds (and never past the lease). */
      maxSeconds: z.number().int().min(1).max(86_400).default(3_600),
      /** Execs running at once per lease. */
      maxPerLease: z.number().int().min(1).max(64).default(4),
    })
    .prefault({}),
  /** Group jobs (several machines of one cluster): what rank 0's tasks tell the others. */
  groupJobs: z
    .strictObject({
      /** This machine's address on the cluster network, as the other machines reach it (SUANLI_MASTER_ADDR). */
      masterAddress: z
        .string()
        .min(1)
        .max(253)
        .regex(/^[A-Za-z0-9.:_-]+$/, "expected a host name or IP address")
        .default("127.0.0.1"),
      /** The rendezvous port rank 0's task listens on (SUANLI_MASTER_PORT). */
      masterPort: z.number().int().min(1).max(65_535).default(29_500),
    })
    .prefault({}),
  /** Port forwarding to the ports a task declared (`ports` in its spec). */
  ports: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** TCP connections open at once per lease. */
      maxConnectionsPerLease: z.number().int().min(1).max(10_000).default(64),
      /** Bytes per second per lease, both directions together; 0: no cap. */
      maxBytesPerSecondPerLease: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
      /** A forwarded connection with no traffic for this long is closed, seconds. */
      idleTimeoutSeconds: z.number().int().min(1).max(86_400).default(600),
    })
    .prefault({}),
  /** Fetching renter-supplied URLs (task bundles). */
  fetch: z
    .strictObject({
      /** Accept `file:` bundle URLs (any file the node can read). Devnet and tests only. */
      allowFileUrls: z.boolean().default(false),
      /** Loopback, link-local or private ranges bundles may be fetched from ("10.0.0.0/8", "127.0.0.1"). */
      allowNetworks: z.array(cidrSchema).max(64).default([]),
    })
    .prefault({}),
  /** The key renters seal secret env values to (node/provider/agent/sealing.ts). */
  sealing: z
    .strictObject({
      /** A new key this often; an old one is deleted once no live lease can need it. */
      rotateSeconds: z
        .number()
        .int()
        .min(60)
        .max(90 * 86_400)
        .default(86_400),
    })
    .prefault({}),
  /** Parent of the task workspaces; default `<dataDir>/workspaces`. */
  workspaceDir: z.string().min(1).optional(),
  grace: z
    .strictObject({
      /** SIGTERM to SIGKILL for a task (stop, preemption, lease time over). */
      taskStopMs: z.number().int().min(0).max(3_600_000).default(10_000),
      /** SIGTERM to SIGKILL for the idle workload when a lease takes its units. */
      idleStopMs: z.number().int().min(0).max(3_600_000).default(5_000),
      /** Notice before an interruptible task is stopped when the chain event does not give one. */
      preemptionNoticeMs: z.number().int().min(0).max(86_400_000).default(30_000),
    })
    .prefault({}),
});
export type ProviderOptions = z.output<typeof providerOptionsSchema>;

/** The settlement token's decimals in production and on the devnet. */
export const SETTLEMENT_TOKEN_DECIMALS = 6;

/**
 * The on-chain price (base units per unit-second) for a price from the config. USD prices are
 * rounded to the nearest base unit; a price that rounds to zero is refused.
 */
export function pricePerUnitSecond(price: PriceInput, tokenDecimals = SETTLEMENT_TOKEN_DECIMALS): bigint {
  if ("pricePerUnitSecond" in price) return price.pricePerUnitSecond;
  // Decimal scaling on the number's 12-decimal form (exact for any price written with up to 12
  // decimals), not a binary float product.
  const [whole, fraction = ""] = price.usdPerGpuHour.toFixed(12).split(".");
  const scaled = BigInt(whole + fraction.padEnd(12, "0").slice(0, 12)); // USD × 10^12 per hour
  const perHour = tokenDecimals >= 12 ? scaled * 10n ** BigInt(tokenDecimals - 12) : scaled / 10n ** BigInt(12 - tokenDecimals);
  const perSecond = (perHour + 1_800n) / 3_600n;
  if (perSecond === 0n) throw new RangeError(`usdPerGpuHour ${price.usdPerGpuHour} is below one base unit per second`);
  return perSecond;
}

/** The configured price of a model (canonical name), in base units per unit-second. */
export function priceForModel(options: ProviderOptions, model: string, tokenDecimals = SETTLEMENT_TOKEN_DECIMALS): bigint | undefined {
  const price = options.prices[model];
  return price ? pricePerUnitSecond(price, tokenDecimals) : undefined;
}

/** The lowest interruptible bid for a model, or undefined when it sells no interruptible capacity. */
export function minBidForModel(options: ProviderOptions, model: string, tokenDecimals = SETTLEMENT_TOKEN_DECIMALS): bigint | undefined {
  const price = options.minBids[model];
  return price ? pricePerUnitSecond(price, tokenDecimals) : undefined;
}
