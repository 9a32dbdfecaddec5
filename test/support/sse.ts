/**
 * A minimal server-sent events client for tests: a plain HTTP GET whose body is split into events
 * as the spec describes (fields up to a blank line). Keeps comments (heartbeats) too.
 */
import http from "node:http";

export type SseEvent = { id: string | undefined; event: string; data: string };

export type SseConnection = {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a non-200 answer. */
  body: string;
  events: SseEvent[];
  comments: string[];
  /** Resolves when `predicate` holds over the events received so far (polls every 10 ms, bounded). */
  waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): void;
  closed: Promise<void>;
};

export function openEventStream(url: string, headers: Record<string, string> = {}): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { accept: "text/event-stream", ...headers } }, (response) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      let buffer = "";
      let body = "";
      let closedResolve!: () => void;
      const closed = new Promise<void>((done) => (closedResolve = done));
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        if (response.statusCode !== 200) {
          body += chunk;
          return;
        }
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          let event = "message";
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) comments.push(line.slice(1).trim());
            else if (line.startsWith("id: ")) id = line.slice(4);
            else if (line.startsWith("event: ")) event = line.slice(7);
            else if (line.startsWith("data: ")) data.push(line.slice(6));
          }
          if (data.length) events.push({ id, event, data: data.join("\n") });
        }
      });
      response.on("close", () => closedResolve());
      response.on("error", () => closedResolve());
      const connection: SseConnection = {
        status: response.statusCode ?? 0,
        headers: response.headers,
        get body() {
          return body;
        },
        events,
        comments,
        async waitFor(predicate, timeoutMs = 5000) {
          for (let waited = 0; waited <= timeoutMs; waited += 10) {
            if (predicate(events)) return;
            await new Promise((done) => setTimeout(done, 10));
          }
          throw new Error(`event stream: condition not met in ${timeoutMs} ms; got ${events.map((e) => `${e.id}:${e.event}`).join(", ")}`);
        },
        close() {
          request.destroy();
        },
        closed,
      };
      if (response.statusCode !== 200) response.on("end", () => resolve(connection));
      else resolve(connection);
    });
    request.on("error", reject);
  });
}

/** Polls `predicate` every 10 ms until it holds (bounded). */
export async function eventually(predicate: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  for (let waited = 0; waited <= timeoutMs; waited += 10) {
    if (await predicate()) return;
    await new Promise((done) => setTimeout(done, 10));
  }
  throw new Error(`not met in ${timeoutMs} ms: ${what}`);
}
