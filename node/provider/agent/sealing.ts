/**
 * Sealed task secrets: a renter seals each secret env value to the provider's sealing key for one
 * lease and variable (common/sealed.ts); the node opens the values only in memory, just before the
 * task starts, never storing the opened values (records keep the sealed form).
 *
 * The key rotates (issue #33, item 9): one seed opened every secret ever sealed to the node. Now
 * a new key pair is made every `provider.sealing.rotateSeconds` (an epoch), each from its own
 * random seed in `<dataDir>/sealing-keys/<id>.json` (0600, in a 0700 folder). The current key is
 * published with the offers and sent in every reserve acceptance, signed by the wallet together
 * with its expiry: the end of its epoch plus a grace (the hold time and 10 minutes) for a renter
 * whose acceptance came just before a rotation. The SDK seals to no expired key. An old key is
 * kept while a live lease (task not ended) may have been sealed to it — one opened before the key
 * expired, with RENTER_REQUEST_MAX_AGE_SECONDS for the clocks — and is then overwritten and
 * deleted. Once a lease's spec is accepted the node knows which keys its secrets opened with (the
 * record's `sealingKeyIds`; none for a spec without secrets): from then on only those are kept for
 * it (the renter sends the same sealed spec again after a restart), so a long lease without
 * secrets holds no key. A lease the node learned of late (a backfill after downtime, a renter's
 * request before the chain event) has no reliable opening time and keeps every key until its spec
 * is accepted.
 *
 * What a stolen key exposes: the secrets sealed to it — leases opened during its epoch and grace
 * — and only to someone who also has those ciphertexts (relays and stores see nothing else).
 * Secrets of earlier epochs whose leases are over are gone with their keys.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import type { LocalAccount } from "viem";
import { z } from "zod";
import { InvalidInputError, SuanliError } from "../../../common/errors.js";
import { RENTER_REQUEST_MAX_AGE_SECONDS } from "../../../common/protocols/lease.js";
import { sealingKeyPairFromSeed, sealingKeyStatement, type SealContext, type SealingKey, type SealingKeyPair } from "../../../common/sealed.js";
import { runDetached } from "../../../common/detached.js";
import type { Logger } from "../../log/logger.js";
import type { TaskSpec } from "../runtime/task.js";

/** The sealing key files cannot be used. */
export class SealingKeyError extends SuanliError {
  override name = "SealingKeyError";
}

/** A key as stored: its own random seed, when it was made and when renters stop sealing to it (unix seconds). */
const storedKeySchema = z.strictObject({
  id: z.number().int().min(0),
  seed: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.number().int().min(0),
  expiresAt: z.number().int().min(0),
});
type StoredKey = z.output<typeof storedKeySchema>;

type HeldKey = StoredKey & { file: string; keyPair: SealingKeyPair; announced: SealingKey };

/**
 * A lease as the ring sees it: when the node saw it open (unix ms; undefined when not known), and
 * the ids of the keys its accepted spec's secrets opened with (empty: no secret; absent while no
 * spec was accepted).
 */
export type LeaseForKeys = { openedAtMs?: number | null | undefined; sealingKeyIds?: readonly number[] | null | undefined };

export type SealingKeyRingOptions = {
  /** A new key this often (provider.sealing.rotateSeconds). */
  rotateSeconds: number;
  /** How long past its epoch a key may still be sealed to: at least the hold time of an acceptance. */
  graceSeconds: number;
  /** Unix ms. */
  now?: () => number;
};

/** The node's sealing keys: the current one and the old ones a live lease may still need. */
export class SealingKeyRing {
  private keys: HeldKey[] = [];
  /** Files of forgotten keys not shredded yet (their shred failed): maintain() tries them again. */
  private unshredded: string[] = [];

  private constructor(
    private readonly dir: string,
    private readonly account: LocalAccount,
    private readonly chainId: number,
    private readonly options: SealingKeyRingOptions,
  ) {}

  /**
   * Loads the keys in `<dataDir>/sealing-keys/`, and makes a current one when none is in its epoch.
   * A single-key `<dataDir>/sealing.key` from before rotation is kept as an expired key (live
   * leases may have been sealed to it) and its file removed.
   */
  static async load(dataDir: string, account: LocalAccount, chainId: number, options: SealingKeyRingOptions): Promise<SealingKeyRing> {
    const ring = new SealingKeyRing(path.join(dataDir, "sealing-keys"), account, chainId, options);
    await mkdir(ring.dir, { recursive: true, mode: 0o700 });
    for (const name of (await readdir(ring.dir)).filter((entry) => /^\d+\.json$/.test(entry)).sort((a, b) => parseInt(a) - parseInt(b))) {
      const file = path.join(ring.dir, name);
      const parsed = storedKeySchema.safeParse(JSON.parse(await readFile(file, "utf8").catch(() => "null")));
      if (!parsed.success)
        throw new SealingKeyError(`The sealing key ${file} cannot be read`, {
          metaMessages: ["Move it away; renters then seal to a new key (secrets sealed to it no longer open)."],
        });
      ring.keys.push(await ring.hold(parsed.data, file));
    }
    await ring.adoptLegacyKey(path.join(dataDir, "sealing.key"));
    if (ring.rotationDue()) await ring.rotate();
    return ring;
  }

  /** The ring's clock (unix ms): the lease records' `openedAtMs` are read on it too. */
  nowMs(): number {
    return (this.options.now ?? Date.now)();
  }

  private nowSeconds(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  private async hold(stored: StoredKey, file: string): Promise<HeldKey> {
    const keyPair = await sealingKeyPairFromSeed(Buffer.from(stored.seed, "hex"));
    const signature = await this.account.signMessage({ message: sealingKeyStatement(this.chainId, this.account.address, keyPair.publicKey, stored.expiresAt) });
    return { ...stored, file, keyPair, announced: { publicKey: keyPair.publicKey, expiresAt: stored.expiresAt, signature } };
  }

  private async adoptLegacyKey(file: string): Promise<void> {
    const seed = (await readFile(file, "utf8").catch(() => undefined))?.trim();
    if (seed === undefined) return;
    if (/^[0-9a-f]{64}$/.test(seed) && !this.keys.some((key) => key.seed === seed)) {
      const now = this.nowSeconds();
      const createdAt = Math.floor((await stat(file)).mtimeMs / 1000);
      await this.store({ id: this.nextId(), seed, createdAt: Math.min(createdAt, now), expiresAt: now });
    }
    await shred(file);
  }

  private nextId(): number {
    return (this.keys.at(-1)?.id ?? 0) + 1;
  }

  private async store(stored: StoredKey): Promise<HeldKey> {
    const file = path.join(this.dir, `${stored.id}.json`);
    // wx: never overwrite a key another start wrote meanwhile.
    await writeFile(file, `${JSON.stringify(stored)}\n`, { mode: 0o600, flag: "wx" });
    const held = await this.hold(stored, file);
    this.keys.push(held);
    return held;
  }

  /** Whether the current key's epoch is over (its expiry less the grace): an adopted legacy key's is at once. */
  private rotationDue(): boolean {
    const current = this.keys.at(-1);
    return !current || this.nowSeconds() >= current.expiresAt - this.options.graceSeconds;
  }

  private async rotate(): Promise<HeldKey> {
    const now = this.nowSeconds();
    return this.store({ id: this.nextId(), seed: randomBytes(32).toString("hex"), createdAt: now, expiresAt: now + this.options.rotateSeconds + this.options.graceSeconds });
  }

  /** The current key as renters get it (public key, expiry, the wallet's signature). */
  current(): SealingKey {
    return this.keys.at(-1)!.announced;
  }

  /** Ids of the keys held now, oldest first. */
  heldIds(): number[] {
    return this.keys.map((key) => key.id);
  }

  /** Whether a renter may have sealed to `key` for a lease the node saw open at `openedAtMs`. */
  private mayServe(key: HeldKey, lease: LeaseForKeys): boolean {
    if (lease.sealingKeyIds) return lease.sealingKeyIds.includes(key.id);
    if (lease.openedAtMs === undefined || lease.openedAtMs === null) return true;
    return lease.openedAtMs / 1000 < key.expiresAt + RENTER_REQUEST_MAX_AGE_SECONDS;
  }

  /**
   * Rotates when the current key's epoch is over, and deletes (overwritten, then unlinked) every
   * old key that is past its expiry and that no live lease may need. Returns what it did.
   */
  async maintain(liveLeases: readonly LeaseForKeys[]): Promise<{ rotated: boolean; deleted: number[]; unshredded: string[] }> {
    // Files of forgotten keys whose shred failed last time (a full disk, a permission): tried again.
    for (const file of this.unshredded.splice(0)) await this.shredOrKeep(file);
    const rotated = this.rotationDue();
    if (rotated) await this.rotate();
    const now = this.nowSeconds();
    const current = this.keys.at(-1)!;
    const deleted: number[] = [];
    for (const key of [...this.keys]) {
      if (key === current || now < key.expiresAt + RENTER_REQUEST_MAX_AGE_SECONDS) continue;
      if (liveLeases.some((lease) => this.mayServe(key, lease))) continue;
      // Forgotten first, shredded after: no reader sees the file gone while the ring still offers the key.
      this.keys = this.keys.filter((held) => held !== key);
      deleted.push(key.id);
      await this.shredOrKeep(key.file);
    }
    return { rotated, deleted, unshredded: [...this.unshredded] };
  }

  private async shredOrKeep(file: string): Promise<void> {
    try {
      await shred(file);
    } catch {
      this.unshredded.push(file);
    }
  }

  /**
   * Runs maintain() every `intervalMs` (at most a minute, so a key is deleted soon after its last
   * lease ends) with the live leases of the moment; `onRotated` hears each new current key (the
   * offers are announced again with it). Returns the stop function.
   */
  startMaintenance(options: { liveLeases: () => readonly LeaseForKeys[]; onRotated: (key: SealingKey) => void; logger: Logger; intervalMs?: number }): () => void {
    const intervalMs = options.intervalMs ?? Math.min(60_000, (this.options.rotateSeconds * 1000) / 4);
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      runDetached(
        this.maintain(options.liveLeases())
          .then(({ rotated, deleted, unshredded }) => {
            if (rotated) {
              options.logger.info("Sealing key rotated", { keyId: this.keys.at(-1)!.id, expiresAt: this.current().expiresAt });
              options.onRotated(this.current());
            }
            if (deleted.length > 0) options.logger.info("Old sealing keys deleted: no live lease can need them", { keyIds: deleted });
            if (unshredded.length > 0) options.logger.warn("Old sealing key files could not be overwritten and removed; tried again at the next pass", { files: unshredded });
          })
          .finally(() => (running = false)),
        options.logger,
        "Maintaining the sealing keys",
      );
    }, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Opens a sealed value of a lease with the keys that may serve it, newest first; throws when none does. */
  async open(sealed: string, context: SealContext, lease: LeaseForKeys): Promise<{ value: string; keyId: number }> {
    for (const key of [...this.keys].reverse()) {
      if (!this.mayServe(key, lease)) continue;
      try {
        return { value: await key.keyPair.open(sealed, context), keyId: key.id };
      } catch {
        // not sealed to this key: try the next
      }
    }
    throw new Error("no key of this provider opens the value");
  }
}

/** Overwrites a key file before unlinking it (best effort: a journaling file system or an SSD may keep old blocks). */
async function shred(file: string): Promise<void> {
  const handle = await open(file, "r+").catch(() => undefined);
  if (handle) {
    try {
      const { size } = await handle.stat();
      await handle.write(Buffer.alloc(size), 0, size, 0);
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
  await unlink(file).catch(async () => rm(file, { force: true }));
}

/**
 * The spec with its sealed env values opened (in memory only, as `{ value, secret: true }`).
 * A value that does not open for this lease, variable and the keys it may have been sealed to is
 * the renter's error.
 */
export async function openSealedSpec(sealing: { ring: SealingKeyRing; chainId: number } | undefined, leaseId: bigint, spec: TaskSpec, lease: LeaseForKeys = {}): Promise<TaskSpec> {
  return (await openSealedSpecKeys(sealing, leaseId, spec, lease)).spec;
}

/** openSealedSpec, and the ids of the keys that opened its values (sorted; empty when it has none): the keys the lease needs from then on. */
export async function openSealedSpecKeys(
  sealing: { ring: SealingKeyRing; chainId: number } | undefined,
  leaseId: bigint,
  spec: TaskSpec,
  lease: LeaseForKeys = {},
): Promise<{ spec: TaskSpec; keyIds: number[] }> {
  const sealed = Object.entries(spec.env).filter(([, value]) => typeof value !== "string" && "sealed" in value);
  if (sealed.length === 0) return { spec, keyIds: [] };
  const env = { ...spec.env };
  const keyIds = new Set<number>();
  for (const [name, value] of sealed) {
    try {
      if (!sealing) throw new Error("this provider has no sealing key");
      const opened = await sealing.ring.open((value as { sealed: string }).sealed, { chainId: sealing.chainId, leaseId, name }, lease);
      env[name] = { value: opened.value, secret: true };
      keyIds.add(opened.keyId);
    } catch {
      throw new InvalidInputError("task", [
        {
          path: `env.${name}`,
          message:
            "the sealed value does not open with this provider's keys for this lease and variable (an expired key is deleted once no lease needs it); seal it again to the key in the provider's acceptance",
        },
      ]);
    }
  }
  return { spec: { ...spec, env }, keyIds: [...keyIds].sort((a, b) => a - b) };
}
