/**
 * The console's server side: which chain RPC URL the node publishes to the page (never an
 * operator's non-loopback URL unasked: it may carry an API key), /console/config.json, and the
 * page's Content-Security-Policy. The page itself is tested in test/e2e/console.test.ts.
 */
import assert from "node:assert/strict";
import { consoleConfigSchema } from "../../common/api/console.js";
import { nodeInfoSchema } from "../../common/api/market.js";
import { apiOptionsSchema } from "../../node/api/options.js";
import { consoleRpcUrl } from "../../node/api/server.js";
import { startApiFixture, testDeployment, type ApiFixture } from "../support/api-fixture.js";

/** The manifest's SessionKeys address: the page's SDK client needs it to revoke a session. */
const SESSIONS = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0";
/** The ERC-4337 contracts a passkey's smart account needs (docs/aa.md): the EntryPoint, the factories and the paymaster. */
const AA = {
  entryPoint: "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108",
  accountFactory: "0x13E9ed32155810FDbd067D4522C492D6f68E5944",
  paymaster: "0x0165878A594ca255338adfa4d48449f69242Eb8F",
  passkeyAccountFactory: "0xa513E6E4b8f2a923D98304ec87F64353C4D5C853",
} as const;

describe("renter console routes", () => {
  const options = (input: Record<string, unknown> = {}) => apiOptionsSchema.parse(input);

  it("publishes the node's own RPC URL only when it is loopback without credentials, else only what the operator set", () => {
    assert.equal(consoleRpcUrl(options(), "http://127.0.0.1:8545"), "http://127.0.0.1:8545");
    assert.equal(consoleRpcUrl(options(), "http://localhost:8545/"), "http://localhost:8545/");
    assert.equal(consoleRpcUrl(options(), "http://[::1]:8545"), "http://[::1]:8545");
    assert.equal(consoleRpcUrl(options(), "https://eth-mainnet.example.com/v2/SECRETKEY"), null);
    assert.equal(consoleRpcUrl(options(), "http://user:pass@127.0.0.1:8545"), null);
    assert.equal(consoleRpcUrl(options(), "http://127.0.0.1:8545/?key=abc"), null);
    assert.equal(consoleRpcUrl(options(), "ws://127.0.0.1:8545"), null);
    assert.equal(consoleRpcUrl(options(), undefined), null);
    assert.equal(consoleRpcUrl(options({ console: { rpcUrl: "https://rpc.example.org" } }), "https://private.example/KEY"), "https://rpc.example.org");
    assert.throws(() => options({ console: { rpcUrl: "ws://rpc.example.org" } }), /http\(s\)/);
    assert.throws(() => options({ console: { bundlerUrl: "ws://127.0.0.1:4337" } }), /http\(s\)/);
    assert.throws(() => options({ console: { paymasterUrl: "not a url" } }), /paymasterUrl/);
  });

  describe("GET /console/config.json and the page", () => {
    let fixture: ApiFixture;
    before(async () => {
      const deployment = testDeployment();
      fixture = await startApiFixture(
        { console: { rpcUrl: "https://rpc.example.org/", bundlerUrl: "https://bundler.example.org/rpc", paymasterUrl: "https://sponsor.example.org/" } },
        { deployment: { ...deployment, contracts: { ...deployment.contracts, sessions: SESSIONS, ...AA } } },
      );
    });
    after(() => fixture?.close());

    it("answers the deployment and the RPC URL the page's SDK client uses", async () => {
      const response = await fixture.api.app.inject({ method: "GET", url: "/console/config.json" });
      assert.equal(response.statusCode, 200);
      const config = consoleConfigSchema.decode(response.json());
      assert.equal(config.rpcUrl, "https://rpc.example.org/");
      assert.equal(config.chainId, config.deployment.chainId);
      assert.equal(typeof response.json().deployment.deploymentBlock, "string");
      // The SessionKeys revocation list is passed on, in the page's deployment and in /v1/info.
      assert.equal(config.deployment.contracts.sessions, SESSIONS);
      const info = nodeInfoSchema.decode((await fixture.api.app.inject({ method: "GET", url: "/v1/info" })).json());
      assert.equal(info.contracts.sessions, SESSIONS);
      // "Sign in with a passkey": the bundler and sponsor the operator named, and the manifest's ERC-4337 contracts.
      assert.equal(config.bundlerUrl, "https://bundler.example.org/rpc");
      assert.equal(config.paymasterUrl, "https://sponsor.example.org/");
      for (const [role, address] of Object.entries(AA)) assert.equal(config.deployment.contracts[role as keyof typeof AA], address, role);
    });

    it("names no bundler or sponsor unless the operator set them: the page then offers no passkey sign-in", async () => {
      const plain = await startApiFixture();
      try {
        const config = consoleConfigSchema.decode((await plain.api.app.inject({ method: "GET", url: "/console/config.json" })).json());
        assert.equal(config.bundlerUrl, null);
        assert.equal(config.paymasterUrl, null);
      } finally {
        await plain.close();
      }
    });

    it("serves the page with a CSP that allows the RPC origin and no inline script", async () => {
      const response = await fixture.api.app.inject({ method: "GET", url: "/console/" });
      assert.equal(response.statusCode, 200);
      assert.match(response.body, /<title>Suanli renter console<\/title>/);
      const csp = String(response.headers["content-security-policy"]);
      assert.match(csp, /script-src 'self';/);
      assert.match(csp, /connect-src 'self' https:\/\/rpc\.example\.org http: https:/);
      const explorer = await fixture.api.app.inject({ method: "GET", url: "/explorer/" });
      assert.match(String(explorer.headers["content-security-policy"]), /connect-src 'self';/, "the explorer's stays 'self' only");
    });

    it("is not served when api.console.enabled is false", async () => {
      const off = await startApiFixture({ console: { enabled: false } });
      try {
        assert.equal((await off.api.app.inject({ method: "GET", url: "/console/" })).statusCode, 404);
        assert.equal((await off.api.app.inject({ method: "GET", url: "/console/config.json" })).statusCode, 404);
      } finally {
        await off.close();
      }
    });
  });
});
