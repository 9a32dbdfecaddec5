/**
 * Reads what one outgoing bitswap frame carries, so that serving limits charge a peer for the
 * blocks it is sent and never for this node's own wants. A frame is one length-prefixed
 * protobuf `Message` (the Bitswap 1.2.0 spec): field 1 wantlist, 2 blocks (1.0.0), 3 payload
 * (`Block { prefix = 1; data = 2 }`), 4 block presences, 5 pending bytes. Only the field headers
 * are read; block bytes are neither copied nor decoded.
 */
import { decode as decodeVarint, encode as encodeVarint, encodingLength } from "uint8-varint";

/** Where a top-level field lies in the frame (byte offsets, header included). */
type FieldRange = { field: number; start: number; end: number };

export type BitswapFrame = {
  /** Blocks in the message (payload and 1.0.0 blocks). */
  blocks: number;
  /** Bytes of those blocks' data. */
  blockBytes: number;
  /** The same message without its blocks (wants and presences only), or undefined when nothing else is in it. */
  withoutBlocks(): Uint8Array | undefined;
};

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

/** Steps over one field's value; returns the offset after it and, for bytes, where they start. */
function skipValue(buf: Uint8Array, offset: number, wire: number): { next: number; valueStart: number } {
  if (wire === WIRE_VARINT) {
    const value = decodeVarint(buf, offset);
    return { next: offset + encodingLength(value), valueStart: offset };
  }
  if (wire === WIRE_FIXED64) return { next: offset + 8, valueStart: offset };
  if (wire === WIRE_FIXED32) return { next: offset + 4, valueStart: offset };
  if (wire === WIRE_BYTES) {
    const length = decodeVarint(buf, offset);
    const valueStart = offset + encodingLength(length);
    return { next: valueStart + length, valueStart };
  }
  throw new RangeError(`unsupported protobuf wire type ${wire}`);
}

function fields(buf: Uint8Array, start: number, end: number): Array<FieldRange & { valueStart: number }> {
  const out: Array<FieldRange & { valueStart: number }> = [];
  let offset = start;
  while (offset < end) {
    const tag = decodeVarint(buf, offset);
    const fieldStart = offset;
    offset += encodingLength(tag);
    const { next, valueStart } = skipValue(buf, offset, tag & 7);
    if (next > end) throw new RangeError("protobuf field runs past its message");
    out.push({ field: tag >>> 3, start: fieldStart, end: next, valueStart });
    offset = next;
  }
  return out;
}

/**
 * Parses one length-prefixed bitswap frame. Returns undefined for bytes that are not exactly one
 * whole frame (the caller then charges them as bytes only).
 */
export function readBitswapFrame(frame: Uint8Array): BitswapFrame | undefined {
  try {
    const length = decodeVarint(frame, 0);
    const bodyStart = encodingLength(length);
    if (bodyStart + length !== frame.length) return undefined;
    return readBitswapMessage(frame.subarray(bodyStart));
  } catch {
    return undefined;
  }
}

/**
 * The same for a frame sent as its parts (libp2p's length-prefixed encoder gives the prefix and
 * the message as two buffers): read in place, never joined into one copy.
 */
export function readBitswapFrameParts(parts: Uint8Array[]): BitswapFrame | undefined {
  if (parts.length === 1) return readBitswapFrame(parts[0]!);
  if (parts.length !== 2) return undefined;
  const [prefix, body] = parts as [Uint8Array, Uint8Array];
  try {
    const length = decodeVarint(prefix, 0);
    if (encodingLength(length) !== prefix.length || length !== body.length) return undefined;
    return readBitswapMessage(body);
  } catch {
    return undefined;
  }
}

/** Parses one bitswap message (the frame's body, without its length prefix); undefined when it does not parse. */
function readBitswapMessage(body: Uint8Array): BitswapFrame | undefined {
  try {
    const top = fields(body, 0, body.length);
    let blocks = 0;
    let blockBytes = 0;
    for (const entry of top) {
      if (entry.field === 2) {
        blocks += 1;
        blockBytes += entry.end - entry.valueStart;
      } else if (entry.field === 3) {
        blocks += 1;
        for (const inner of fields(body, entry.valueStart, entry.end)) if (inner.field === 2) blockBytes += inner.end - inner.valueStart;
      }
    }
    return {
      blocks,
      blockBytes,
      withoutBlocks() {
        const kept = top.filter((entry) => entry.field !== 2 && entry.field !== 3);
        if (!kept.length) return undefined;
        const bodyLength = kept.reduce((sum, entry) => sum + entry.end - entry.start, 0);
        const prefix = encodeVarint(bodyLength);
        const out = new Uint8Array(prefix.length + bodyLength);
        out.set(prefix, 0);
        let offset = prefix.length;
        for (const entry of kept) {
          out.set(body.subarray(entry.start, entry.end), offset);
          offset += entry.end - entry.start;
        }
        return out;
      },
    };
  } catch {
    return undefined;
  }
}
