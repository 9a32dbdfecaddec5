// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ILeaseMarket} from "../interfaces/ILeaseMarket.sol";
import {ILeaseMarketTypes} from "../interfaces/ILeaseMarketTypes.sol";
import {IProviderRegistry} from "../interfaces/IProviderRegistry.sol";

/// @title SuanliLens
/// @notice Test-only reader: returns the public views of a whole deployment in one call, so the
///         property test can check its invariants after every step without hundreds of calls. It
///         computes nothing itself.
contract SuanliLens {
    /// @notice Everything the property test reads, at one block.
    struct Snapshot {
        uint256 timestamp;
        uint256 totalSupply;
        uint256[] balances;
        ILeaseMarketTypes.LeaseView[] leases;
        IProviderRegistry.ProviderView[] providers;
        IProviderRegistry.MachineView[] machines;
    }

    /// @notice Token balances of `accounts`, every lease, and the given providers and machines.
    /// @param market The LeaseMarket.
    /// @param accounts Accounts whose token balance to read.
    /// @param providers Providers to read.
    /// @param machines Machines to read.
    /// @return snapshot_ The views, leases indexed from lease id 1.
    function snapshot(
        address market,
        address[] calldata accounts,
        address[] calldata providers,
        uint32[] calldata machines
    ) external view returns (Snapshot memory snapshot_) {
        ILeaseMarket lm = ILeaseMarket(market);
        IERC20 token = IERC20(lm.token());
        IProviderRegistry registry = IProviderRegistry(lm.registry());
        snapshot_.timestamp = block.timestamp;
        snapshot_.totalSupply = token.totalSupply();
        snapshot_.balances = new uint256[](accounts.length);
        for (uint256 i; i < accounts.length; ++i) {
            snapshot_.balances[i] = token.balanceOf(accounts[i]);
        }
        uint256 count = lm.nextLeaseId() - 1;
        snapshot_.leases = new ILeaseMarketTypes.LeaseView[](count);
        for (uint256 i; i < count; ++i) {
            snapshot_.leases[i] = lm.getLease(i + 1);
        }
        snapshot_.providers = new IProviderRegistry.ProviderView[](providers.length);
        for (uint256 i; i < providers.length; ++i) {
            snapshot_.providers[i] = registry.getProvider(providers[i]);
        }
        snapshot_.machines = new IProviderRegistry.MachineView[](machines.length);
        for (uint256 i; i < machines.length; ++i) {
            snapshot_.machines[i] = registry.getMachine(machines[i]);
        }
    }
}
