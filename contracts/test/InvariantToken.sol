// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @title InvariantToken
/// @notice Test token of the invariant suite (test/contracts/support/invariants.ts): EIP-2612 permits and a
///         USDC-style blocklist. A blocked address can neither send nor receive, so any transfer to or from it
///         reverts, as a regulated stablecoin does.
contract InvariantToken is ERC20, ERC20Permit {
    /// @notice The blocklist admin (the deployer).
    address public immutable ADMIN;
    /// @notice Addresses that can neither send nor receive.
    mapping(address account => bool) public blocked;

    /// @notice A transfer touched a blocked address.
    error Blocked(address account);
    /// @notice Only the admin may change the blocklist.
    error NotAdmin(address caller);

    constructor() ERC20("Invariant USD", "iUSD") ERC20Permit("Invariant USD") {
        ADMIN = msg.sender;
    }

    /// @notice Mints `amount` to `to` (test only).
    /// @param to Receiver.
    /// @param amount Amount.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Blocks or unblocks `account`.
    /// @param account The account.
    /// @param value Whether it is blocked.
    function setBlocked(address account, bool value) external {
        if (msg.sender != ADMIN) revert NotAdmin(msg.sender);
        blocked[account] = value;
    }

    function _update(address from, address to, uint256 value) internal override {
        if (blocked[from]) revert Blocked(from);
        if (blocked[to]) revert Blocked(to);
        super._update(from, to, value);
    }
}
