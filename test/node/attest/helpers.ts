import assert from "node:assert/strict";
import { privateKeyToAccount } from "viem/accounts";
import type { OpenRequestMessage } from "../../../common/attest/messages.js";
import type { CommitResult } from "../../../node/attest/challenge/index.js";
import type { Address } from "viem";
import { suanliDomain } from "../../../common/eip712.js";

// Fixed test keys (the first accounts of the public `test test ... junk` mnemonic): no value anywhere.
export const attestorAccount = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
export const otherAttestorAccount = privateKeyToAccount("0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a");
export const strangerAccount = privateKeyToAccount("0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6");
export const providerAccount = privateKeyToAccount("0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a");

export const domain = suanliDomain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3");

export const attestorSet = new Set<string>([attestorAccount.address, otherAttestorAccount.address].map((a) => a.toLowerCase()));
export const isAttestor = (address: Address): boolean => attestorSet.has(address.toLowerCase());

/** The open request an accepted commit produced; fails the test with the reason otherwise. */
export function openRequestOf(result: CommitResult): OpenRequestMessage {
  assert.equal(result.outcome, "open", result.outcome === "fail" ? `${result.reason}: ${result.detail}` : "");
  return (result as Extract<CommitResult, { outcome: "open" }>).request;
}
