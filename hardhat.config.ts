import { createRequire } from "node:module";
import { defineConfig } from "hardhat/config";
import hardhatViem from "@nomicfoundation/hardhat-viem";
import hardhatMocha from "@nomicfoundation/hardhat-mocha";
import hardhatNetworkHelpers from "@nomicfoundation/hardhat-network-helpers";
import hardhatViemAssertions from "@nomicfoundation/hardhat-viem-assertions";
import quietTransientStorageWarning from "./scripts/hardhat-quiet-warnings.ts";

// Compile with solc-js from npm: Hardhat would otherwise download a native solc from a host
// this machine cannot reach. The version is read from the package so the two never drift.
const require = createRequire(import.meta.url);
const solcVersion: string = require("solc/package.json").version;
const solcPath: string = require.resolve("solc/soljson.js");

export default defineConfig({
  // The last one drops solc's transient-storage warning from OpenZeppelin's guard (scripts/hardhat-quiet-warnings.ts).
  plugins: [hardhatViem, hardhatViemAssertions, hardhatMocha, hardhatNetworkHelpers, quietTransientStorageWarning],
  solidity: {
    version: solcVersion,
    path: solcPath,
    // OpenZeppelin's TimelockController, unmodified, is the governance of a real deployment
    // (docs/contracts.md, "Roles and the timelock"): built from the package so its artifact is the audited code.
    npmFilesToBuild: ["@openzeppelin/contracts/governance/TimelockController.sol"],
    settings: {
      // 1,000 runs keeps LeaseMarket and its extension ~4 KiB under the 24 KiB code limit; the hot
      // paths cost within ~0.5 % of what 10,000 runs gives (bench/gas.ts measured both).
      optimizer: { enabled: true, runs: 1_000 },
      // The market's entry points take many arguments (offer, terms, signatures); the IR pipeline
      // keeps them off the stack-too-deep wall and packs storage writes better.
      viaIR: true,
      evmVersion: "cancun",
    },
  },
  paths: {
    sources: "contracts",
    tests: { mocha: "test" },
  },
  test: {
    mocha: {
      timeout: 60_000,
      // Spec output, plus a JSON summary file when SUANLI_TEST_SUMMARY names one (.ci/run reads it).
      reporter: "./test/support/summary-reporter.cjs",
    },
  },
  networks: {
    // `npm run chain` serves this network on 127.0.0.1:8545 with `hardhat node`.
    default: {
      type: "edr-simulated",
      chainType: "l1",
      chainId: 31337,
      allowUnlimitedContractSize: false,
    },
  },
});
