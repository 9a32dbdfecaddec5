import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { MerkleTree, leafHash, nodeHash, pureSha256, treeDepth, verifyMerkleProof } from "../../../common/attest/merkle.js";
import { nodeSha256 } from "../../../node/attest/runner/hash.js";

const id = createHash("sha256").update("merkle test").digest();
function leaves(count: number): Uint8Array[] {
  return Array.from({ length: count }, (_, i) => leafHash(id, i, Uint8Array.from([i, i >> 8, 1, 2])));
}

describe("attest Merkle tree", () => {
  it("proves every leaf of trees of any size, and pads with zero leaves", () => {
    for (const count of [1, 2, 3, 5, 8, 13, 64]) {
      const tree = MerkleTree.fromLeaves(leaves(count));
      assert.equal(tree.depth, treeDepth(count));
      for (let i = 0; i < count; i++) {
        assert.ok(verifyMerkleProof(tree.root, leaves(count)[i]!, i, count, tree.proof(i)), `leaf ${i} of ${count}`);
      }
    }
    // Three leaves: the fourth is 32 zero bytes.
    const [a, b, c] = leaves(3);
    const zero = new Uint8Array(32);
    assert.deepEqual(MerkleTree.fromLeaves([a!, b!, c!]).root, nodeHash(nodeHash(a!, b!), nodeHash(c!, zero)));
    // One leaf: the root is the leaf.
    assert.deepEqual(MerkleTree.fromLeaves([a!]).root, a);
  });

  it("rejects a changed leaf, sibling, index, or a proof of the wrong length", () => {
    const list = leaves(6);
    const tree = MerkleTree.fromLeaves(list);
    const proof = tree.proof(2);
    const flipped = Uint8Array.from(list[2]!);
    flipped[0]! ^= 1;
    assert.equal(verifyMerkleProof(tree.root, flipped, 2, 6, proof), false);
    const badSibling = proof.map((s) => Uint8Array.from(s));
    badSibling[1]![5]! ^= 0x80;
    assert.equal(verifyMerkleProof(tree.root, list[2]!, 2, 6, badSibling), false);
    assert.equal(verifyMerkleProof(tree.root, list[2]!, 3, 6, proof), false);
    assert.equal(verifyMerkleProof(tree.root, list[2]!, 2, 6, proof.slice(1)), false);
    assert.equal(verifyMerkleProof(tree.root, list[2]!, 2, 4, proof), false, "proof for another tree size");
    // A padding position is never a row, even with a proof that hashes up correctly.
    assert.equal(verifyMerkleProof(tree.root, new Uint8Array(32), 6, 6, tree.proof(4)), false);
  });

  it("binds each leaf to its challenge and index", () => {
    const data = Uint8Array.from([1, 2, 3, 4]);
    const other = createHash("sha256").update("other").digest();
    assert.notDeepEqual(leafHash(id, 0, data), leafHash(id, 1, data));
    assert.notDeepEqual(leafHash(id, 0, data), leafHash(other, 0, data));
  });

  it("gives the same root with node:crypto and the pure hash", () => {
    const list = leaves(9);
    assert.deepEqual(MerkleTree.fromLeaves(list, nodeSha256).root, MerkleTree.fromLeaves(list, pureSha256).root);
  });
});
