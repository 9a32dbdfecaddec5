// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IEntryPoint} from "@openzeppelin/contracts/interfaces/IERC4337.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {PasskeyAccount} from "./PasskeyAccount.sol";

/// @title PasskeyAccountFactory
/// @notice Creates renters' PasskeyAccounts at addresses that depend only on the passkey's public key and a salt, so an
///         account has its address before it exists: its first user operation deploys it, through this factory's
///         `createAccount` in the operation's initCode (docs/aa.md "A passkey owner").
/// @dev Each account is an ERC-1167 clone (OpenZeppelin's Clones, CREATE2) of one PasskeyAccount implementation that
///      this factory deploys in its constructor, keyed by keccak256(qx, qy, salt), and initialised in the same call.
contract PasskeyAccountFactory {
    /// @notice The PasskeyAccount every account is a clone of (its code, and the EntryPoint it trusts).
    PasskeyAccount public immutable ACCOUNT_IMPLEMENTATION;

    /// @notice An account was created for the passkey (qx, qy) and salt.
    /// @param account The new account.
    /// @param qx The x coordinate of the passkey's P-256 public key.
    /// @param qy Its y coordinate.
    /// @param salt Which of the passkey's accounts.
    event PasskeyAccountCreated(address indexed account, bytes32 qx, bytes32 qy, uint256 salt);

    /// @param entryPoint The EntryPoint v0.8 the accounts trust.
    constructor(IEntryPoint entryPoint) {
        ACCOUNT_IMPLEMENTATION = new PasskeyAccount(entryPoint);
    }

    /// @notice The account of the passkey (qx, qy) and salt, created if it is not there yet (an existing one is returned
    ///         as it is, so an EntryPoint's initCode for an account that exists does no harm).
    /// @param qx The x coordinate of the passkey's P-256 public key.
    /// @param qy Its y coordinate; a point not on the curve reverts (SignerP256InvalidPublicKey).
    /// @param salt Which of the passkey's accounts (0 for the first).
    /// @return account The account, at `getAddress(qx, qy, salt)`.
    function createAccount(bytes32 qx, bytes32 qy, uint256 salt) external returns (PasskeyAccount account) {
        bytes32 key = _cloneSalt(qx, qy, salt);
        address predicted = Clones.predictDeterministicAddress(address(ACCOUNT_IMPLEMENTATION), key);
        if (predicted.code.length > 0) return PasskeyAccount(payable(predicted));
        account = PasskeyAccount(payable(Clones.cloneDeterministic(address(ACCOUNT_IMPLEMENTATION), key)));
        account.initialize(qx, qy);
        emit PasskeyAccountCreated(address(account), qx, qy, salt);
    }

    /// @notice Where `createAccount(qx, qy, salt)` puts (or has put) the account.
    /// @param qx The x coordinate of the passkey's P-256 public key.
    /// @param qy Its y coordinate.
    /// @param salt Which of the passkey's accounts.
    /// @return The account's address.
    function getAddress(bytes32 qx, bytes32 qy, uint256 salt) external view returns (address) {
        return Clones.predictDeterministicAddress(address(ACCOUNT_IMPLEMENTATION), _cloneSalt(qx, qy, salt));
    }

    function _cloneSalt(bytes32 qx, bytes32 qy, uint256 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(qx, qy, salt));
    }
}
