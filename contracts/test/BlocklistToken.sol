// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {TestToken} from "./TestToken.sol";

/// @title BlocklistToken
/// @notice Test-only TestToken with a USDC-style blocklist: a blocked account can neither send nor receive.
///         It shows that no party who cannot receive tokens can lock another party's funds or exit in Suanli.
///         Never deploy it anywhere but a test chain.
contract BlocklistToken is TestToken {
    mapping(address account => bool) private _blocked;

    /// @notice A transfer involved a blocked account.
    error AccountBlocked(address account);

    /// @notice Blocks or unblocks `account` (test only: anyone may call).
    /// @param account The account.
    /// @param blocked Whether it is blocked.
    function setBlocked(address account, bool blocked) external {
        _blocked[account] = blocked;
    }

    function _update(address from, address to, uint256 value) internal override {
        if (_blocked[from]) revert AccountBlocked(from);
        if (_blocked[to]) revert AccountBlocked(to);
        super._update(from, to, value);
    }
}
