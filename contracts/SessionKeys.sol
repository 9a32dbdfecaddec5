// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ISessionKeys} from "./interfaces/ISessionKeys.sol";

/// @title SessionKeys
/// @notice The revocation list nodes honour for renters' session keys (issue 38), and on-chain approvals for renters
///         that cannot sign a delegation (a smart account without ERC-1271). A renter's wallet signs one
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

    /// @notice When a renter approved a delegation by a call (`approve`): the block's timestamp; 0 = not approved.
    mapping(address renter => mapping(bytes32 delegation => uint64)) public approvedAt;

    /// @inheritdoc ISessionKeys
    function approve(bytes32 delegation) external {
        if (delegation == bytes32(0)) revert ZeroDelegation();
        if (approvedAt[msg.sender][delegation] != 0) revert AlreadyApproved(msg.sender, delegation);
        approvedAt[msg.sender][delegation] = uint64(block.timestamp);
        emit SessionApproved(msg.sender, delegation);
    }

    /// @inheritdoc ISessionKeys
    function check(address renter, bytes32 delegation, uint64 issuedAt) external view returns (bool approved, bool revoked) {
        return (approvedAt[renter][delegation] != 0, _isRevoked(renter, delegation, issuedAt));
    }

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
        return _isRevoked(renter, delegation, issuedAt);
    }

    function _isRevoked(address renter, bytes32 delegation, uint64 issuedAt) private view returns (bool) {
        return revokedAt[renter][delegation] != 0 || issuedAt <= revokedBefore[renter];
    }
}
