/**
 * The flags of `npm run deploy` (deploy-cli.ts), parsed and checked before the chain is even asked: a bad flag or an
 * unsafe combination (production parameters without a timelock or on the faucet token) is refused with what is
 * accepted, and nothing is sent.
 */
import { parseArgs } from "node:util";
import { parseEther, type Address, type Hex } from "viem";
import { z } from "zod";
import { SuanliError } from "../../common/errors.js";
import { addressSchema } from "../../common/schemas.js";
import { PARAMS_PRESETS, PRODUCTION_TIMELOCK_DELAY_SECONDS, type ParamsPreset } from "./deploy-params.js";
import type { DeployOptions } from "./deploy.js";
import { DEFAULT_DEPLOYMENTS_DIR } from "./manifest.js";
import { ANYONE } from "./timelock.js";

export class DeployFlagError extends SuanliError {
  override name = "DeployFlagError";
}

export type DeployPlan = {
  rpcUrl: string;
  /** The deployer's key; without it the devnet's first account, on the devnet only. */
  privateKey?: Hex;
  out: string;
  /** `--replace-staking`: only a new AttestorStaking (deploy-cli.ts). */
  replaceStaking?: { predecessor?: Address; attach: boolean };
  /** What deployContracts is given besides the clients. */
  deploy: Pick<DeployOptions, "preset" | "params" | "token" | "attestors" | "timelock" | "accountAbstraction" | "sponsor">;
};

const presetSchema = z.enum(Object.keys(PARAMS_PRESETS) as [ParamsPreset, ...ParamsPreset[]], {
  error: `--params must be one of: ${Object.keys(PARAMS_PRESETS).join(", ")}`,
});
const delaySchema = z
  .string()
  .regex(/^\d{1,10}$/, "--timelock-delay must be a whole number of seconds")
  .transform(Number);

function addressFlag(flag: string, value: string): Address {
  const parsed = addressSchema.safeParse(value);
  if (!parsed.success) throw new DeployFlagError(`${flag} must be an address (0x followed by 40 hex digits), got "${value}"`);
  return parsed.data;
}

function check<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new DeployFlagError(parsed.error.issues.map((issue) => issue.message).join("; "));
  return parsed.data;
}

/** Parses `npm run deploy -- ...` arguments (see deploy-cli.ts for the usage). */
export function parseDeployFlags(args: string[], env: NodeJS.ProcessEnv = process.env): DeployPlan {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        "rpc-url": { type: "string", default: env.SUANLI_CHAIN__RPC_URL ?? "http://127.0.0.1:8545" },
        "private-key": { type: "string", default: env.SUANLI_DEPLOYER_KEY },
        out: { type: "string", default: DEFAULT_DEPLOYMENTS_DIR },
        params: { type: "string", default: "devnet" },
        token: { type: "string" },
        proposer: { type: "string", multiple: true },
        executor: { type: "string", multiple: true },
        canceller: { type: "string", multiple: true },
        "timelock-delay": { type: "string" },
        treasury: { type: "string" },
        attestor: { type: "string", multiple: true },
        "account-abstraction": { type: "boolean", default: false },
        "sponsor-signer": { type: "string" },
        "sponsor-deposit": { type: "string" },
        "replace-staking": { type: "boolean", default: false },
        predecessor: { type: "string" },
        attach: { type: "boolean", default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new DeployFlagError((error as Error).message, {
      metaMessages: [
        "Accepted: --rpc-url, --private-key, --out, --params devnet|production, --token, --proposer, --executor, --canceller, --timelock-delay, --treasury, --attestor, --account-abstraction [--sponsor-signer 0x… --sponsor-deposit ETH]; or --replace-staking [--predecessor] [--attach].",
      ],
    });
  }
  const privateKey = values["private-key"] || undefined;
  if (privateKey !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(privateKey)) throw new DeployFlagError("--private-key must be 0x followed by 64 hex digits");
  const common = { rpcUrl: values["rpc-url"], out: values.out, ...(privateKey ? { privateKey: privateKey as Hex } : {}) };
  const deployOnly = [
    "params",
    "token",
    "proposer",
    "executor",
    "canceller",
    "timelock-delay",
    "treasury",
    "attestor",
    "account-abstraction",
    "sponsor-signer",
    "sponsor-deposit",
  ].filter((flag) => args.includes(`--${flag}`));
  if (values["replace-staking"]) {
    if (deployOnly.length) throw new DeployFlagError(`--replace-staking deploys only a new AttestorStaking: ${deployOnly.map((f) => `--${f}`).join(", ")} do not apply`);
    const predecessor = values.predecessor === undefined ? undefined : addressFlag("--predecessor", values.predecessor);
    return { ...common, replaceStaking: { ...(predecessor ? { predecessor } : {}), attach: values.attach }, deploy: {} };
  }
  if (values.predecessor !== undefined || values.attach) throw new DeployFlagError("--predecessor and --attach go with --replace-staking");

  const preset = check(presetSchema, values.params);
  const delay = values["timelock-delay"] === undefined ? undefined : check(delaySchema, values["timelock-delay"]);
  const token = values.token === undefined ? undefined : addressFlag("--token", values.token);
  const treasury = values.treasury === undefined ? undefined : addressFlag("--treasury", values.treasury);
  const proposers = (values.proposer ?? []).map((value) => addressFlag("--proposer", value));
  const executors = (values.executor ?? []).map((value) => (value === "anyone" ? ANYONE : addressFlag("--executor (or anyone)", value)));
  const cancellers = (values.canceller ?? []).map((value) => addressFlag("--canceller", value));
  const attestors = (values.attestor ?? []).map((value) => addressFlag("--attestor", value));
  const sponsorSigner = values["sponsor-signer"] === undefined ? undefined : addressFlag("--sponsor-signer", values["sponsor-signer"]);
  if ((sponsorSigner || values["sponsor-deposit"] !== undefined) && !values["account-abstraction"]) {
    throw new DeployFlagError("--sponsor-signer and --sponsor-deposit deploy the SponsorPaymaster, which needs --account-abstraction");
  }
  if (values["sponsor-deposit"] !== undefined && !sponsorSigner)
    throw new DeployFlagError("--sponsor-deposit funds the SponsorPaymaster: pass --sponsor-signer 0x… (a node's sponsor key) too");
  let sponsorDeposit: bigint | undefined;
  if (values["sponsor-deposit"] !== undefined) {
    if (!/^\d{1,9}(\.\d{1,18})?$/.test(values["sponsor-deposit"]))
      throw new DeployFlagError(`--sponsor-deposit takes ETH as a decimal number (e.g. 0.5), not ${values["sponsor-deposit"]}`);
    sponsorDeposit = parseEther(values["sponsor-deposit"]);
  }
  if (!proposers.length && (executors.length || cancellers.length || delay !== undefined)) {
    throw new DeployFlagError("--executor, --canceller and --timelock-delay set up the timelock: pass at least one --proposer");
  }
  if (preset === "production") {
    if (!proposers.length) {
      throw new DeployFlagError("--params production hands every admin power to a timelock: pass --proposer 0x… (a multisig), and --executor and --canceller as needed");
    }
    if (!token) throw new DeployFlagError("--params production settles in an existing token: pass --token 0x… (a 6-decimal ERC-20), not the devnet's open-faucet TestToken");
  }
  return {
    ...common,
    deploy: {
      preset,
      ...(treasury ? { params: { treasury } } : {}),
      ...(token ? { token } : {}),
      attestors,
      // ERC-4337's EntryPoint v0.8 and SimpleAccountFactory where the chain lacks them (docs/aa.md).
      ...(values["account-abstraction"] ? { accountAbstraction: true } : {}),
      // The SponsorPaymaster for a node's sponsor (docs/aa.md "Gas without ETH").
      ...(sponsorSigner ? { sponsor: { signer: sponsorSigner, ...(sponsorDeposit ? { depositWei: sponsorDeposit } : {}) } } : {}),
      ...(proposers.length
        ? {
            timelock: {
              // Production: 8 days (PRODUCTION_TIMELOCK_DELAY_SECONDS); otherwise the preset's unbonding delay, the least
              // deployContracts accepts.
              minDelaySeconds: delay ?? (preset === "production" ? PRODUCTION_TIMELOCK_DELAY_SECONDS : PARAMS_PRESETS[preset].unbondingDelay),
              proposers,
              // Without --executor the proposers execute too.
              executors: executors.length ? executors : proposers,
              cancellers,
            },
          }
        : {}),
    },
  };
}
