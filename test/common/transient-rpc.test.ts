import assert from "node:assert/strict";
import { HttpRequestError, RpcRequestError, TimeoutError } from "viem";
import { isTransientRpcError } from "../../common/chain/tx.js";

// What the SDK's wait (and any caller) retries: a chain endpoint away, overloaded or failing
// inside, not an answer that would be the same on the next try.
describe("isTransientRpcError", () => {
  const url = "http://127.0.0.1:8545";
  it("retries an endpoint that is away, times out, answers 5xx or 429, or fails inside", () => {
    assert.equal(isTransientRpcError(new HttpRequestError({ url })), true, "connection refused or reset: no status");
    assert.equal(isTransientRpcError(new HttpRequestError({ url, status: 502 })), true);
    assert.equal(isTransientRpcError(new HttpRequestError({ url, status: 429 })), true);
    assert.equal(isTransientRpcError(new TimeoutError({ body: {}, url })), true);
    assert.equal(isTransientRpcError(new RpcRequestError({ body: {}, url, error: { code: -32603, message: "internal error" } })), true);
  });
  it("does not retry a refusal that would repeat: 4xx, a bad request, a revert, or an error that is not viem's", () => {
    assert.equal(isTransientRpcError(new HttpRequestError({ url, status: 400 })), false);
    assert.equal(isTransientRpcError(new RpcRequestError({ body: {}, url, error: { code: -32602, message: "invalid params" } })), false);
    assert.equal(isTransientRpcError(new RpcRequestError({ body: {}, url, error: { code: 3, message: "execution reverted" } })), false);
    assert.equal(isTransientRpcError(new Error("HTTP request failed")), false);
    assert.equal(isTransientRpcError(undefined), false);
  });
});
