// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ISessionKeys} from "./interfaces/ISessionKeys.sol";

/// @title SessionKeys
/// @notice The revocation list nodes honour for renters' session keys (issue 38). A renter's wallet signs one
///         EIP-712 delegation to a session key; a node accepts a request signed by the key only while the delegation
///         is unexpired, within its scope, and not revoked here (`isRevoked`). Revocation is by msg.sender only: a
///         renter revokes its own delegations, one (`revoke`) or all issued up to now (`revokeAll`), and nobody can
///         revoke someone else's session. A smart-account renter (ERC-4337) revokes from its account.
/// @dev Holds no money, has no admin and is not upgradeable: nothing but a renter's own call writes its entries.
contract SessionKeys is ISessionKeys {
    /// @notice When a renter revoked a delegation (its EIP-712 hash): the block's timestamp; 0 = not revoked.
    mapping(address renter => mapping(bytes32 delegation => uint64)) public revokedAt;

    /// @notice Every delegation of a renter whose issuedAt is at or before this unix time is revoked (its last
    ///         `revokeAll`); 0 = never called. A delegation issued at 0 is therefore always revoked: the SDK stamps
    ///         the time it signs.
    mapping(address renter => uint64) public revokedBefore;

    /// @inheritdoc ISessionKeys
    function revoke(bytes32 delegation) external {
        if (delegation == bytes32(0)) revert ZeroDelegation();
        if (revokedAt[msg.sender][delegation] != 0) revert AlreadyRevoked(msg.sender, delegation);
        // A block's timestamp is never 0, so a revoked entry is never read as "not revoked".
        revokedAt[msg.sender][delegation] = uint64(block.timestamp);
        emit SessionRevoked(msg.sender, delegation);
    }

    /// @inheritdoc ISessionKeys
    function revokeAll() external {
        // Block timestamps never decrease, so the bound only moves forward.
        uint64 before = uint64(block.timestamp);
        revokedBefore[msg.sender] = before;
        emit AllSessionsRevoked(msg.sender, before);
    }

    /// @inheritdoc ISessionKeys
    function isRevoked(address renter, bytes32 delegation, uint64 issuedAt) external view returns (bool revoked) {
        return revokedAt[renter][delegation] != 0 || issuedAt <= revokedBefore[renter];
    }
}
