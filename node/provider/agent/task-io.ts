/**
 * The task I/O protocols a provider serves (common/protocols/task-io.ts): the renter downloads its
 * task's output folder, runs commands inside the running task, and opens TCP connections to the
 * ports the task declared. Every request carries the lease renter's signed authorization, checked
 * by the lease controller exactly as for logs; exec and forward work only while the task runs,
 * and everything they opened is closed when it ends.
 */
import type { ChildProcess } from "node:child_process";
import { spawnChild } from "../../process/child.js";
import type { Socket } from "node:net";
import { pipeSocket } from "../../../common/p2p/socket-pipe.js";
import path from "node:path";
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import { SuanliError } from "../../../common/errors.js";
import { EXEC_PROTOCOL, FORWARD_PROTOCOL, OUTPUT_PROTOCOL } from "../../../common/p2p/protocols.js";
import { handleStreamProtocol, jsonFrame, parseJsonFrame } from "../../../common/p2p/streams.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { execRequestSchema, forwardRequestSchema, outputRequestSchema } from "../../../common/protocols/lease.js";
import {
  FORWARD_FRAME_BYTES,
  OUTPUT_ACK_BYTES,
  OUTPUT_FRAME_BYTES,
  OUTPUT_WINDOW_BYTES,
  TASK_IO_CONTROL_MAX_BYTES,
  execInputFrameSchema,
  type ExecParams,
  type OutputManifest,
  type OutputParams,
} from "../../../common/protocols/task-io.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { ProviderOptions } from "../options.js";
import type { TaskHandle } from "../runtime/runtime.js";
import { connectToTaskPort } from "../runtime/task-port.js";
import { resizeTty, ttyArgv } from "../runtime/tty.js";
import { OutputNotAvailableError, PortNotDeclaredError, TaskIoLimitError, TaskIoUnavailableError, TaskNotRunningError } from "./errors.js";
import type { LeaseController } from "./leases.js";
import { OutputLimitError, openOutputFile, snapshotOutputDir, type OutputSnapshot, type OutputStore } from "./outputs.js";
import { InvalidMessageError } from "../../../common/p2p/errors.js";
import { runDetached } from "../../../common/detached.js";

type Parts = { leases: LeaseController; outputs: OutputStore; options: ProviderOptions; metrics: Metrics; logger: Logger };

/** Per-lease bandwidth budget of forwarded connections (a token bucket over one second). */
class RateLimiter {
  private tokens: number;
  private last = Date.now();
  constructor(private readonly bytesPerSecond: number) {
    this.tokens = bytesPerSecond;
  }
  async take(bytes: number): Promise<void> {
    if (this.bytesPerSecond <= 0) return;
    for (let rounds = 0; rounds < 100_000; rounds++) {
      const now = Date.now();
      this.tokens = Math.min(this.bytesPerSecond, this.tokens + ((now - this.last) / 1000) * this.bytesPerSecond);
      this.last = now;
      if (this.tokens >= Math.min(bytes, this.bytesPerSecond)) {
        this.tokens -= bytes;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.ceil(((bytes - this.tokens) / this.bytesPerSecond) * 1000)));
    }
  }
}

type LeaseSessions = { forwards: Set<Socket>; execs: Set<ChildProcess>; limiter: RateLimiter; watching: boolean };

export class TaskIoService {
  private readonly sessions = new Map<string, LeaseSessions>();

  constructor(private readonly parts: Parts) {}

  private sessionsOf(leaseId: bigint, handle: TaskHandle): LeaseSessions {
    const key = leaseId.toString();
    let sessions = this.sessions.get(key);
    if (!sessions) {
      sessions = { forwards: new Set(), execs: new Set(), limiter: new RateLimiter(this.parts.options.ports.maxBytesPerSecondPerLease), watching: false };
      this.sessions.set(key, sessions);
    }
    if (!sessions.watching) {
      sessions.watching = true;
      // The lease's task ended (or the lease did): everything opened for it closes.
      runDetached(
        handle
          .wait()
          .catch(() => undefined)
          .then(() => this.closeLease(key)),
        this.parts.logger,
        "Closing the sessions of an ended task",
      );
    }
    return sessions;
  }

  private closeLease(key: string): void {
    const sessions = this.sessions.get(key);
    if (!sessions) return;
    this.sessions.delete(key);
    for (const socket of sessions.forwards) socket.destroy();
    for (const child of sessions.execs) killGroup(child);
  }

  /** Registers the three protocols; returns a function that unregisters them and closes what is open. */
  async serve(host: SuanliHost): Promise<() => Promise<void>> {
    const { metrics, logger } = this.parts;
    const onError = (protocol: string) => (error: SuanliError, peer: { toString(): string }) => {
      metrics.p2pRequestErrors.inc({ protocol, name: error.name });
      logger.debug("Task I/O request refused", { protocol, peer: peer.toString(), error: error.name, message: error.shortMessage });
    };
    const stops = [
      await handleStreamProtocol(host, OUTPUT_PROTOCOL, {
        requestSchema: outputRequestSchema,
        maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
        handler: (request, session) => this.output(request.auth, request.params, session.lp, session.stream, session.accept),
        onError: onError(OUTPUT_PROTOCOL),
      }),
      await handleStreamProtocol(host, EXEC_PROTOCOL, {
        requestSchema: execRequestSchema,
        maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
        handler: (request, session) => this.exec(request.auth, request.params, session.lp, session.stream, session.accept),
        onError: onError(EXEC_PROTOCOL),
      }),
      await handleStreamProtocol(host, FORWARD_PROTOCOL, {
        requestSchema: forwardRequestSchema,
        maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
        maxInboundStreamsPerPeer: this.parts.options.ports.maxConnectionsPerLease * 4,
        handler: (request, session) => this.forward(request.auth, request.params, session.lp, session.stream, session.accept),
        onError: onError(FORWARD_PROTOCOL),
      }),
    ];
    return async () => {
      for (const stop of stops) await stop();
      for (const key of [...this.sessions.keys()]) this.closeLease(key);
    };
  }

  // -------------------------------------------------------------------------------------------
  // output

  private async output(
    auth: Parameters<LeaseController["authorizeIo"]>[0],
    params: OutputParams,
    lp: LengthPrefixedStream<Stream>,
    stream: Stream,
    accept: (body: unknown) => Promise<void>,
  ): Promise<void> {
    const { record, handle } = await this.parts.leases.authorizeIo(auth, "output", params);
    const policy = this.parts.outputs.policy;
    let snapshot: OutputSnapshot | undefined;
    let kind: OutputManifest["kind"];
    let expiresAt: number | null = null;
    if (record.phase !== "ended") {
      if (!handle) throw new OutputNotAvailableError(`The task of lease ${record.leaseId} has not started yet: no output to download`);
      kind = "snapshot";
      try {
        snapshot = await snapshotOutputDir(path.join(handle.workspace, "output"), policy.maxBytes);
      } catch (error) {
        if (error instanceof OutputLimitError) throw new OutputNotAvailableError(error.message);
        throw error;
      }
      if (!snapshot) throw new OutputNotAvailableError(`The task of lease ${record.leaseId} has not written an output/ folder yet`);
    } else {
      kind = "final";
      const kept = await this.parts.outputs.get(record.leaseId);
      if (!kept) {
        throw new OutputNotAvailableError(`This provider no longer holds the output of lease ${record.leaseId}`, {
          metaMessages: [`Outputs are kept ${policy.retentionSeconds} s after the task ends (provider.outputs.retentionSeconds).`],
        });
      }
      if ("refused" in kept) throw new OutputNotAvailableError(kept.refused);
      snapshot = kept.snapshot;
      expiresAt = kept.expiresAt;
    }
    const manifest: OutputManifest = {
      leaseId: record.leaseId.toString(),
      kind,
      files: snapshot.files.map((file) => ({ path: file.rel, size: file.size })),
      totalBytes: snapshot.totalBytes,
      expiresAt,
      policy,
    };
    let start = 0;
    let offset = 0;
    if (params.op === "read" && params.fromPath !== undefined) {
      start = snapshot.files.findIndex((file) => file.rel === params.fromPath);
      const from = snapshot.files[start];
      if (!from) throw new InvalidMessageError(`${params.fromPath} is not a file of the output`, { fields: ["params.fromPath"] });
      offset = params.fromOffset;
      if (offset > from.size) throw new InvalidMessageError(`fromOffset ${offset} is past the end of ${params.fromPath} (${from.size} bytes)`, { fields: ["params.fromOffset"] });
    }
    await accept(manifest);
    if (params.op === "list") {
      await stream.close();
      return;
    }
    let sent = 0;
    let unacked = 0;
    for (const [index, file] of snapshot.files.entries()) {
      if (index < start) continue;
      let position = index === start ? offset : 0;
      if (position >= file.size) continue;
      const fileHandle = await openOutputFile(snapshot.root, file.rel);
      try {
        while (position < file.size) {
          const buffer = Buffer.allocUnsafe(Math.min(OUTPUT_FRAME_BYTES, file.size - position));
          const { bytesRead } = await fileHandle.read(buffer, 0, buffer.length, position);
          if (bytesRead === 0) throw new OutputLimitError(`${file.rel} shrank while it was being sent`);
          await lp.write(buffer.subarray(0, bytesRead));
          position += bytesRead;
          sent += bytesRead;
          unacked += bytesRead;
          // Flow control: wait for the renter to have written what is in flight.
          while (unacked > OUTPUT_WINDOW_BYTES) {
            await lp.read({ signal: AbortSignal.timeout(60_000) });
            unacked -= OUTPUT_ACK_BYTES;
          }
        }
      } finally {
        await fileHandle.close();
      }
    }
    this.parts.logger.debug("Output sent", { leaseId: record.leaseId, kind, bytes: sent });
    await stream.close();
  }

  // -------------------------------------------------------------------------------------------
  // exec

  private async exec(
    auth: Parameters<LeaseController["authorizeIo"]>[0],
    params: ExecParams,
    lp: LengthPrefixedStream<Stream>,
    stream: Stream,
    accept: (body: unknown) => Promise<void>,
  ): Promise<void> {
    const { record, handle } = await this.parts.leases.authorizeIo(auth, "exec", params);
    const { exec } = this.parts.options;
    if (!exec.enabled) throw new TaskIoUnavailableError("This provider does not allow exec (provider.exec.enabled is false)");
    if (!handle) throw new TaskNotRunningError(`The task of lease ${record.leaseId} is not running (${record.state})`);
    const sessions = this.sessionsOf(record.leaseId, handle);
    if (sessions.execs.size >= exec.maxPerLease) throw new TaskIoLimitError(`At most ${exec.maxPerLease} execs run at once per lease (provider.exec.maxPerLease)`);
    const command = typeof params.command === "string" ? ["/bin/sh", "-c", params.command] : params.command;
    // Interactive: on a pseudo-terminal made inside the task's environment (stdout and stderr merged, as on any terminal).
    const argv = params.tty ? ttyArgv(command, params.tty) : command;
    const launch = handle.execLaunch(argv);
    if (!launch) throw new TaskNotRunningError(`The task of lease ${record.leaseId} is not running`);
    const [program, ...programArgs] = launch.argv;
    if (program === undefined) throw new TaskIoUnavailableError("The task's runtime gave an empty exec command line");
    const child = spawnChild(program, programArgs, { cwd: launch.cwd, env: launch.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    sessions.execs.add(child);
    const spawned = await new Promise<Error | undefined>((resolve) => {
      child.once("spawn", () => resolve(undefined));
      child.once("error", (error) => resolve(error));
    });
    if (spawned) {
      sessions.execs.delete(child);
      throw new TaskIoUnavailableError(`Cannot start ${program}: ${spawned.message}`);
    }
    this.parts.logger.info("Exec started in a task", { leaseId: record.leaseId, pid: child.pid });
    await accept({ pid: child.pid ?? null });

    let timedOut = false;
    const timer = setTimeout(
      () => {
        timedOut = true;
        killGroup(child);
      },
      Math.min(params.timeoutSeconds, exec.maxSeconds) * 1000,
    );
    // Output frames are written one at a time, in order.
    let writing: Promise<void> = Promise.resolve();
    const send = (frame: unknown) => {
      writing = writing.then(() => lp.write(jsonFrame(frame))).catch(() => killGroup(child));
      return writing;
    };
    const pump = (source: NodeJS.ReadableStream, name: "stdout" | "stderr") => {
      source.on("data", (chunk: Buffer) => {
        for (let at = 0; at < chunk.length; at += FORWARD_FRAME_BYTES) {
          runDetached(send({ stream: name, data: chunk.subarray(at, at + FORWARD_FRAME_BYTES).toString("base64") }), undefined, "Forwarding exec output");
        }
      });
    };
    pump(child.stdout!, "stdout");
    pump(child.stderr!, "stderr");
    // Input from the renter: stdin frames; the stream closing (or an abort) stops the command.
    runDetached(
      (async () => {
        try {
          for (let frames = 0; frames < Number.MAX_SAFE_INTEGER; frames++) {
            const frame = parseJsonFrame(execInputFrameSchema, (await lp.read()).subarray(), "exec input");
            if ("stdin" in frame) child.stdin!.write(Buffer.from(frame.stdin, "base64"));
            else if ("resize" in frame) {
              if (params.tty && child.pid !== undefined) await resizeTty(child.pid, frame.resize);
            } else child.stdin!.end();
          }
        } catch {
          child.stdin!.end();
          if (child.exitCode === null && child.signalCode === null && stream.status !== "open") killGroup(child);
        }
      })(),
      this.parts.logger,
      "Reading exec input",
    );
    const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) => child.once("close", (code, signal) => resolve({ code, signal })));
    clearTimeout(timer);
    sessions.execs.delete(child);
    await send({ exitCode: exit.code, signal: exit.signal, timedOut });
    await writing;
    await stream.close().catch(() => stream.abort(new Error("exec stream close failed")));
  }

  // -------------------------------------------------------------------------------------------
  // forward

  private async forward(
    auth: Parameters<LeaseController["authorizeIo"]>[0],
    params: { port: number },
    lp: LengthPrefixedStream<Stream>,
    stream: Stream,
    accept: (body: unknown) => Promise<void>,
  ): Promise<void> {
    const { record, handle } = await this.parts.leases.authorizeIo(auth, "forward", params);
    const { ports } = this.parts.options;
    if (!ports.enabled) throw new TaskIoUnavailableError("This provider does not forward ports (provider.ports.enabled is false)");
    const declared = (record.spec as { ports?: number[] } | null)?.ports ?? [];
    if (!declared.includes(params.port)) {
      throw new PortNotDeclaredError(`Port ${params.port} is not declared by the task of lease ${record.leaseId}`, {
        metaMessages: [declared.length ? `Declared ports: ${declared.join(", ")}.` : "The task declared no ports: add `ports: [8000]` to its spec."],
      });
    }
    if (!handle) throw new TaskNotRunningError(`The task of lease ${record.leaseId} is not running (${record.state})`);
    const sessions = this.sessionsOf(record.leaseId, handle);
    if (sessions.forwards.size >= ports.maxConnectionsPerLease) {
      throw new TaskIoLimitError(`At most ${ports.maxConnectionsPerLease} forwarded connections per lease (provider.ports.maxConnectionsPerLease)`);
    }
    const socket = await connectToTaskPort(handle, params.port);
    sessions.forwards.add(socket);
    const limiter = sessions.limiter;
    try {
      await accept({ port: params.port });
      await pipeSocket(socket, lp, stream, limiter, ports.idleTimeoutSeconds * 1000);
    } finally {
      sessions.forwards.delete(socket);
      socket.destroy();
    }
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}
