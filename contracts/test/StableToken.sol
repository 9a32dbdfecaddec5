// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";

/// @title StableToken
/// @notice Test-only stand-in for an existing stablecoin that a real deployment settles in: no faucet (the whole
///         supply goes to one holder at construction), its own decimals, and EIP-2612 under a domain version the
///         deployer chooses ("2" like USDC, "1" like OpenZeppelin's ERC20Permit) or none at all (`permitVersion`
///         empty: `permit` always reverts, like a token without EIP-2612). Never deploy it anywhere but a test chain.
contract StableToken is ERC20, EIP712, Nonces, IERC20Permit {
    bytes32 private constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    uint8 private immutable _DECIMALS;
    bool private immutable _HAS_PERMIT;

    /// @notice The permit's deadline passed.
    error PermitExpired(uint256 deadline);
    /// @notice The permit was not signed by `owner`.
    error PermitInvalidSigner(address signer, address owner);
    /// @notice This token has no EIP-2612 permit.
    error PermitUnsupported();

    /// @param name_ The token's name (and its EIP-712 domain name).
    /// @param symbol_ The symbol.
    /// @param decimals_ The decimals.
    /// @param permitVersion The EIP-712 domain version of `permit`; empty: no permit.
    /// @param holder Receives the whole supply.
    /// @param supply The supply, in base units.
    constructor(
        string memory name_,
        string memory symbol_,
        uint8 decimals_,
        string memory permitVersion,
        address holder,
        uint256 supply
    ) ERC20(name_, symbol_) EIP712(name_, permitVersion) {
        _DECIMALS = decimals_;
        _HAS_PERMIT = bytes(permitVersion).length != 0;
        _mint(holder, supply);
    }

    /// @notice The token's decimals, fixed at construction.
    function decimals() public view override returns (uint8) {
        return _DECIMALS;
    }

    /// @inheritdoc IERC20Permit
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
    {
        if (!_HAS_PERMIT) revert PermitUnsupported();
        if (block.timestamp > deadline) revert PermitExpired(deadline);
        bytes32 digest =
            _hashTypedDataV4(keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, _useNonce(owner), deadline)));
        address signer = ECDSA.recover(digest, v, r, s);
        if (signer != owner) revert PermitInvalidSigner(signer, owner);
        _approve(owner, spender, value);
    }

    /// @inheritdoc IERC20Permit
    function nonces(address owner) public view override(IERC20Permit, Nonces) returns (uint256) {
        return super.nonces(owner);
    }

    /// @inheritdoc IERC20Permit
    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }
}
