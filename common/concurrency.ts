/** Bounded concurrency shared by node and SDK: chain reads that must not flood an RPC. */

/** Runs `fn` over `items`, at most `limit` at once, keeping the order. */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      // index < items.length: checked by the loop condition.
      out[index] = await fn(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
