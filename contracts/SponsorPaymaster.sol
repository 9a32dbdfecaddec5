// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {_packValidationData} from "@account-abstraction/contracts/core/Helpers.sol";
import {UserOperationLib} from "@account-abstraction/contracts/core/UserOperationLib.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title SponsorPaymaster
/// @notice Pays the gas of ERC-4337 user operations that the deployment's sponsor signed (issue 38, docs/aa.md): a
///         renter's smart account with no ETH rents with tUSD only. The sponsor is a Suanli node's service that signs
///         only operations calling the deployment's own contracts, within gas caps and a per-account daily budget;
///         this contract checks its EIP-712 signature over the whole operation (everything but the account's own
///         signature) and the window it gave, and nothing else. The gas it pays comes from its deposit in the
///         EntryPoint, which the owner funds (from the protocol fee's treasury) and can withdraw.
/// @dev The verifying paymaster of eth-infinitism's samples, with an EIP-712 digest (chain id and this contract in
///      the domain; the operation's nonce makes each signature single-use). `paymasterAndData` is the paymaster, its
///      two gas limits (16 bytes each), then `validUntil` (6 bytes), `validAfter` (6 bytes) and the 65-byte signature.
contract SponsorPaymaster is BasePaymaster, EIP712 {
    /// @notice The sponsorship the signer gives: the operation's fields, its paymaster gas limits and the window.
    bytes32 public constant SPONSORSHIP_TYPEHASH = keccak256(
        "Sponsorship(address sender,uint256 nonce,bytes32 initCodeHash,bytes32 callDataHash,bytes32 accountGasLimits,uint256 paymasterGasLimits,uint256 preVerificationGas,bytes32 gasFees,uint48 validUntil,uint48 validAfter)"
    );

    uint256 private constant VALID_UNTIL_OFFSET = UserOperationLib.PAYMASTER_DATA_OFFSET;
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6;
    uint256 private constant SIGNATURE_OFFSET = VALID_AFTER_OFFSET + 6;
    uint256 private constant DATA_LENGTH = SIGNATURE_OFFSET + 65;

    /// @notice The sponsor's key: the only signer whose sponsorships this paymaster honours.
    address public signer;

    /// @notice The owner replaced the sponsor's key (a new node, or a key rotation).
    event SignerChanged(address indexed previous, address indexed next);

    /// @notice The sponsor's key cannot be the zero address.
    error ZeroSigner();
    /// @notice `paymasterAndData` must be exactly `length` bytes: paymaster, gas limits, two 6-byte times, a 65-byte signature.
    error BadSponsorData(uint256 length, uint256 expected);

    constructor(IEntryPoint entryPoint_, address signer_) BasePaymaster(entryPoint_) EIP712("SuanliSponsor", "1") {
        if (signer_ == address(0)) revert ZeroSigner();
        signer = signer_;
        emit SignerChanged(address(0), signer_);
    }

    /// @notice Replaces the sponsor's key; sponsorships signed by the old one fail from the next block on.
    function setSigner(address next) external onlyOwner {
        if (next == address(0)) revert ZeroSigner();
        emit SignerChanged(signer, next);
        signer = next;
    }

    /// @notice The EIP-712 digest the sponsor signs for `userOp` within [validAfter, validUntil].
    function sponsorshipDigest(PackedUserOperation calldata userOp, uint48 validUntil, uint48 validAfter) public view returns (bytes32) {
        bytes32 structHash = keccak256(
            abi.encode(
                SPONSORSHIP_TYPEHASH,
                userOp.sender,
                userOp.nonce,
                keccak256(userOp.initCode),
                keccak256(userOp.callData),
                userOp.accountGasLimits,
                uint256(bytes32(userOp.paymasterAndData[UserOperationLib.PAYMASTER_VALIDATION_GAS_OFFSET:UserOperationLib.PAYMASTER_DATA_OFFSET])),
                userOp.preVerificationGas,
                userOp.gasFees,
                validUntil,
                validAfter
            )
        );
        return _hashTypedDataV4(structHash);
    }

    /// @dev A signature that is not the sponsor's fails validation (SIG_VALIDATION_FAILED, the bundler drops the
    ///      operation); the window is enforced by the EntryPoint from the packed times.
    function _validatePaymasterUserOp(
        PackedUserOperation calldata userOp,
        bytes32,
        uint256
    ) internal view override returns (bytes memory context, uint256 validationData) {
        bytes calldata data = userOp.paymasterAndData;
        if (data.length != DATA_LENGTH) revert BadSponsorData(data.length, DATA_LENGTH);
        uint48 validUntil = uint48(bytes6(data[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        uint48 validAfter = uint48(bytes6(data[VALID_AFTER_OFFSET:SIGNATURE_OFFSET]));
        (address recovered, ECDSA.RecoverError failure, ) = ECDSA.tryRecover(sponsorshipDigest(userOp, validUntil, validAfter), data[SIGNATURE_OFFSET:]);
        bool failed = failure != ECDSA.RecoverError.NoError || recovered != signer;
        return ("", _packValidationData(failed, validUntil, validAfter));
    }
}
