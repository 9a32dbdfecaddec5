/**
 * Container test images built on this machine, without any download: a rootfs holding Debian's
 * statically linked busybox (package busybox-static) and a symlink per applet, `podman import`ed
 * under a local name. Building is idempotent (an existing image is reused) and takes about a
 * second the first time.
 *
 * `containerSupport()` says whether Podman with runc can run a container here. Tests call
 * `requireContainerSupport()` in a `before` hook: CI installs podman, runc and busybox-static
 * (.ci/run), so a missing piece fails the test with what to install; it never skips.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile, copyFile, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const exec = promisify(execFile);

/** The local busybox image the container tests run. */
export const BUSYBOX_IMAGE = "localhost/suanli-test/busybox:1";

/** Debian's busybox-static; the dynamic busybox would need libc inside the image. */
const BUSYBOX_CANDIDATES = ["/bin/busybox", "/usr/bin/busybox"];

/** The engine flags this kind of host needs (see docs/provider.md "Container runtime"). */
export const HOST_RUN_FLAGS = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"];

export type ContainerSupport = { ok: true; podman: string } | { ok: false; reason: string };

async function runs(file: string, args: string[], timeoutMs = 60_000): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(file, args, { timeout: timeoutMs, encoding: "utf8" });
    return { ok: true, stdout, stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, stdout: e.stdout ?? "", stderr: e.stderr || e.message };
  }
}

async function staticBusybox(): Promise<string | undefined> {
  for (const candidate of BUSYBOX_CANDIDATES) {
    if (!existsSync(candidate)) continue;
    // A dynamic busybox would import fine and then fail in the container with "no such file".
    const info = await runs("file", ["-L", candidate]);
    if (!info.ok || info.stdout.includes("statically linked")) return candidate;
  }
  return undefined;
}

let built: Promise<string> | undefined;

/**
 * Builds (once per machine: the image store keeps it) the busybox image and returns its name.
 * Throws saying what is missing when busybox-static or podman is not installed.
 */
export function buildBusyboxImage(name = BUSYBOX_IMAGE): Promise<string> {
  if (name === BUSYBOX_IMAGE && built) return built;
  const job = (async () => {
    const exists = await runs("podman", ["image", "exists", name]);
    if (exists.ok) return name;
    const busybox = await staticBusybox();
    if (!busybox) throw new Error("busybox-static is not installed (apt-get install busybox-static; .ci/run installs it)");
    const root = await mkdtemp(path.join(tmpdir(), "suanli-rootfs-"));
    try {
      for (const dir of ["bin", "tmp", "etc", "workspace", "proc", "sys", "dev"]) await mkdir(path.join(root, dir));
      await chmod(path.join(root, "tmp"), 0o1777);
      await copyFile(busybox, path.join(root, "bin", "busybox"));
      await chmod(path.join(root, "bin", "busybox"), 0o755);
      const list = await runs(busybox, ["--list"]);
      if (!list.ok) throw new Error(`${busybox} --list failed: ${list.stderr}`);
      for (const applet of list.stdout
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => /^[a-z0-9_.[-]+$/.test(line) && line !== "busybox")) {
        await symlink("busybox", path.join(root, "bin", applet));
      }
      await writeFile(path.join(root, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n");
      await writeFile(path.join(root, "etc", "group"), "root:x:0:\nnogroup:x:65534:\n");
      const tarred = await runs("sh", ["-c", `tar -C "$1" -c . | podman import --change 'ENV PATH=/bin' --change 'CMD ["/bin/sh"]' - "$2"`, "sh", root, name], 120_000);
      if (!tarred.ok) {
        // Another test process may have imported it at the same time.
        if ((await runs("podman", ["image", "exists", name])).ok) return name;
        throw new Error(`podman import of the busybox rootfs failed: ${tarred.stderr.trim()}`);
      }
      return name;
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  })();
  if (name === BUSYBOX_IMAGE) {
    built = job;
    job.catch(() => {
      built = undefined;
    });
  }
  return job;
}

let support: Promise<ContainerSupport> | undefined;

/**
 * Whether Podman with runc can run a container on this machine: both installed, the busybox image
 * builds, and `podman run` of it prints what it was asked to. Checked once per test process.
 */
export function containerSupport(): Promise<ContainerSupport> {
  support ??= (async (): Promise<ContainerSupport> => {
    const version = await runs("podman", ["--version"]);
    if (!version.ok) return { ok: false, reason: "podman is not installed (apt-get install podman runc; .ci/run installs them)" };
    const runc = await runs("runc", ["--version"]);
    if (!runc.ok) return { ok: false, reason: "runc is not installed (apt-get install runc; .ci/run installs it)" };
    const slirp = await runs("slirp4netns", ["--version"]);
    if (!slirp.ok) return { ok: false, reason: "slirp4netns is not installed (apt-get install slirp4netns; .ci/run installs it): networked containers need it" };
    let image: string;
    try {
      image = await buildBusyboxImage();
    } catch (error) {
      return { ok: false, reason: (error as Error).message };
    }
    const probe = await runs("podman", ["run", "--rm", ...HOST_RUN_FLAGS, "--network", "none", image, "echo", "suanli-container-ok"], 120_000);
    if (!probe.ok || !probe.stdout.includes("suanli-container-ok")) {
      return { ok: false, reason: `podman --runtime runc cannot run a container here: ${probe.stderr.trim().split("\n").slice(-3).join(" ")}` };
    }
    return { ok: true, podman: version.stdout.trim() };
  })();
  return support;
}

/** For a mocha `before` hook: fails (never skips) with what is missing. */
export async function requireContainerSupport(): Promise<void> {
  const result = await containerSupport();
  if (!result.ok) throw new Error(`container tests need Podman with runc: ${result.reason}`);
}
