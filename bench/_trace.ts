/**
 * `npm run bench -- gas --trace openLease,claim`: where a transaction's gas goes, from the node's
 * debug_traceTransaction struct logs. Prints every storage read and write, log and external call
 * (with the gas each cost, by call depth), then the opcodes that cost most in total. Calls are
 * counted at their own depth (the caller's line shows the call's whole cost).
 */
type StructLog = { op: string; gasCost: number; depth: number; gas: number; stack?: string[] };

export async function traceSummary(provider: { request(a: { method: string; params: unknown[] }): Promise<unknown> }, hash: string, label: string): Promise<void> {
  const trace = (await provider.request({
    method: "debug_traceTransaction",
    params: [hash, { disableStack: false, disableMemory: true, disableStorage: true }],
  })) as { structLogs: StructLog[] };
  const logs = trace.structLogs;
  const byOp = new Map<string, number>();
  const lines: string[] = [];
  for (let i = 0; i < logs.length; i++) {
    const l = logs[i]!;
    let cost = l.gasCost;
    if (l.op === "CALL" || l.op === "STATICCALL" || l.op === "DELEGATECALL") {
      // The call's gasCost includes the gas it forwards: its real cost is the drop in gas to the next op at this depth.
      let j = i + 1;
      while (j < logs.length && logs[j]!.depth !== l.depth) j++;
      const whole = j < logs.length ? l.gas - logs[j]!.gas : l.gasCost;
      const target = l.stack ? l.stack[l.stack.length - 2] : "?";
      lines.push(`  ${"  ".repeat(l.depth - 1)}${l.op} 0x…${target!.slice(-8)}: ${whole}`);
      let inner = 0;
      for (let k = i + 1; k < j; k++) if (logs[k]!.depth === l.depth + 1) inner += logs[k]!.gasCost;
      cost = whole - inner;
    } else if (l.op === "SLOAD" || l.op === "SSTORE" || l.op.startsWith("LOG") || l.op === "TSTORE" || l.op === "TLOAD") {
      const slot = l.op === "SSTORE" && l.stack ? ` slot …${l.stack[l.stack.length - 1]!.slice(-6)}` : "";
      lines.push(`  ${"  ".repeat(l.depth - 1)}${l.op} ${l.gasCost}${slot}`);
    }
    byOp.set(l.op, (byOp.get(l.op) ?? 0) + cost);
  }
  const top = [...byOp.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  console.log(`== ${label}\n${lines.join("\n")}\n  most: ${top}`);
}
