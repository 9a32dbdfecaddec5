// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

/// @title ISessionKeys
/// @notice The revocation list of renters' session-key delegations (issue 38; docs/contracts.md, "Session keys"). A
///         renter's wallet signs one EIP-712 delegation to a key its page, SDK or CLI generated; providers and nodes
///         honour requests signed by that key only while the delegation is unexpired and `isRevoked` is false. A
///         renter revokes one delegation (`revoke`) or every delegation issued up to now (`revokeAll`), always for
///         itself: the renter is msg.sender, so nobody can revoke someone else's session. A smart-account renter
///         (ERC-4337) revokes from its account, as a call of that account.
interface ISessionKeys {
    // ---------------------------------------------------------------- events

    /// @notice `renter` revoked the delegation whose EIP-712 hash is `delegation`.
    event SessionRevoked(address indexed renter, bytes32 indexed delegation);
    /// @notice `renter` revoked every delegation it issued at or before `before` (a unix time in seconds).
    event AllSessionsRevoked(address indexed renter, uint64 before);
    /// @notice `renter` approved the delegation whose EIP-712 hash is `delegation` by a call instead of a signature.
    event SessionApproved(address indexed renter, bytes32 indexed delegation);

    // ---------------------------------------------------------------- errors

    /// @notice The zero hash names no delegation.
    error ZeroDelegation();
    /// @notice `renter` already revoked `delegation`.
    error AlreadyRevoked(address renter, bytes32 delegation);
    /// @notice `renter` already approved `delegation`.
    error AlreadyApproved(address renter, bytes32 delegation);

    // ---------------------------------------------------------------- functions

    /// @notice Revokes one of the caller's delegations for good: from the next block on, nodes refuse requests signed
    ///         under it. Only the caller's own: the same hash revoked by another account leaves the caller's valid.
    /// @param delegation The delegation's EIP-712 hash (the digest the renter's signature covers).
    function revoke(bytes32 delegation) external;

    /// @notice Approves one of the caller's delegations by a call: for a renter that is a contract which cannot sign
    ///         (a smart account without ERC-1271, such as SimpleAccount), batched with its lease in one user operation.
    ///         Nodes accept such a delegation, sent without a signature, when its renter has code and approved it here;
    ///         revocation (`revoke`, `revokeAll`) and the delegation's own scope and expiry apply as to a signed one.
    /// @param delegation The delegation's EIP-712 hash.
    function approve(bytes32 delegation) external;

    /// @notice What nodes read for a delegated request: whether `renter` approved `delegation` here, and whether it is
    ///         revoked (as `isRevoked`), in one call.
    /// @param renter The delegation's renter.
    /// @param delegation The delegation's EIP-712 hash.
    /// @param issuedAt The delegation's own issuedAt (unix seconds), as signed.
    /// @return approved True when the renter approved it by `approve`.
    /// @return revoked True when nodes must refuse requests made under it.
    function check(address renter, bytes32 delegation, uint64 issuedAt) external view returns (bool approved, bool revoked);

    /// @notice When `renter` approved `delegation` by `approve` (the block's timestamp); 0 when it did not.
    function approvedAt(address renter, bytes32 delegation) external view returns (uint64);

    /// @notice Revokes every delegation the caller issued at or before the current block's timestamp (one signed in
    ///         the same second included); a delegation issued later is not affected. Calling it again moves the bound
    ///         forward; it never moves back.
    function revokeAll() external;

    /// @notice Whether `renter`'s delegation `delegation`, issued at `issuedAt`, is revoked: revoked one by one, or
    ///         issued at or before the renter's `revokedBefore`. Nodes call it before honouring a delegated request.
    /// @param renter The account that signed the delegation (a smart account's address for a smart-account renter).
    /// @param delegation The delegation's EIP-712 hash.
    /// @param issuedAt The delegation's own issuedAt (unix seconds), as signed.
    /// @return revoked True when nodes must refuse requests made under the delegation.
    function isRevoked(address renter, bytes32 delegation, uint64 issuedAt) external view returns (bool revoked);

    /// @notice When `renter` revoked `delegation` (the block's timestamp); 0 when it did not.
    function revokedAt(address renter, bytes32 delegation) external view returns (uint64);

    /// @notice Every delegation of `renter` issued at or before this unix time is revoked (the last `revokeAll`); 0
    ///         when the renter never called it.
    function revokedBefore(address renter) external view returns (uint64);
}
