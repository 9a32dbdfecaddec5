// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {Account} from "@openzeppelin/contracts/account/Account.sol";
import {ERC7821} from "@openzeppelin/contracts/account/extensions/draft-ERC7821.sol";
import {IEntryPoint} from "@openzeppelin/contracts/interfaces/IERC4337.sol";
import {Initializable} from "@openzeppelin/contracts/proxy/utils/Initializable.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignerP256} from "@openzeppelin/contracts/utils/cryptography/signers/SignerP256.sol";
import {ERC7739} from "@openzeppelin/contracts/utils/cryptography/signers/draft-ERC7739.sol";
import {SignerWebAuthn} from "@openzeppelin/contracts/utils/cryptography/signers/SignerWebAuthn.sol";

/// @title PasskeyAccount
/// @notice An ERC-4337 smart account (EntryPoint v0.8) owned by a passkey: a renter's WebAuthn credential, whose P-256
///         public key (qx, qy) signs each user operation (issue 38, docs/aa.md "A passkey owner"). Built from
///         OpenZeppelin's parts, unmodified: `Account` (validation, prefund), `SignerWebAuthn` (the signature is
///         WebAuthn.sol's `WebAuthnAuth`, its challenge the user operation's hash, user verification required) and
///         `ERC7821` (batch execution: every call or none), and `ERC7739` (ERC-1271 `isValidSignature` for a passkey
///         assertion over the hash rewrapped in the account's own EIP-712 domain, so that a signature made for one
///         account or chain is refused by another: docs/aa.md "ERC-1271 on the PasskeyAccount").
/// @dev Deployed once as the implementation of PasskeyAccountFactory's clones (ERC-1167), which share its code and so
///      its immutable EntryPoint; each clone is initialised once with its owner's key, in the factory's transaction.
///      Its EIP-712 domain ("PasskeyAccount", "1", the chain, the clone's own address) is rebuilt for each clone
///      (EIP712 caches it for the implementation's address only); the name and version are short strings held in code,
///      so a clone reads no storage of the implementation. The SDK still approves a renter's session on-chain
///      (SessionKeys.approve), for a reason docs/aa.md gives.
contract PasskeyAccount is Account, EIP712, ERC7739, SignerWebAuthn, ERC7821, Initializable {
    /// @dev The implementation's own key, so that no one can sign for it: a point of P-256 whose x is the first valid
    ///      one from sha256("Suanli PasskeyAccount implementation: no one holds this key") upwards, with no known
    ///      discrete logarithm. Clones never read it: their storage holds their owner's key.
    bytes32 private constant IMPLEMENTATION_QX = 0x5a446ccfc45997bc9d86e13e4c09ceeaa10545177fa5dc1befb940cc42b1a7ca;
    bytes32 private constant IMPLEMENTATION_QY = 0xa2c7f58fbb1fcbdee7bc3300f0266c096c60542fcb5d6b4c74aa1ee606d5b9f3;

    IEntryPoint private immutable _ENTRY_POINT;

    /// @notice The EntryPoint given is the zero address.
    error PasskeyAccountZeroEntryPoint();

    /// @param entryPoint_ The EntryPoint v0.8 that alone (besides the account itself) may make it execute.
    constructor(IEntryPoint entryPoint_) EIP712("PasskeyAccount", "1") SignerP256(IMPLEMENTATION_QX, IMPLEMENTATION_QY) {
        if (address(entryPoint_) == address(0)) revert PasskeyAccountZeroEntryPoint();
        _ENTRY_POINT = entryPoint_;
        _disableInitializers();
    }

    /// @notice Sets the owner's passkey of a new clone; once only (the factory calls it as it creates the clone).
    /// @param qx The x coordinate of the passkey's P-256 public key.
    /// @param qy Its y coordinate; a point not on the curve reverts (SignerP256InvalidPublicKey).
    function initialize(bytes32 qx, bytes32 qy) external initializer {
        _setSigner(qx, qy);
    }

    /// @inheritdoc Account
    function entryPoint() public view override returns (IEntryPoint) {
        return _ENTRY_POINT;
    }

    /// @dev The EntryPoint executes the account's user operations; the account itself may call `execute` too.
    function _erc7821AuthorizedExecutor(address caller, bytes32 mode, bytes calldata executionData) internal view override returns (bool) {
        return caller == address(entryPoint()) || super._erc7821AuthorizedExecutor(caller, mode, executionData);
    }
}
