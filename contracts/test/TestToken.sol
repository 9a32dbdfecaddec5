// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @title TestToken
/// @notice A 6-decimal settlement token for devnets and tests, with an open faucet. It has no
///         value: anyone may mint up to FAUCET_MAX per call.
contract TestToken is ERC20, ERC20Permit {
    /// @notice The most one faucet call mints (1,000,000 tokens of 6 decimals).
    uint256 public constant FAUCET_MAX = 1_000_000 * 1e6;

    /// @notice A faucet call asked for more than FAUCET_MAX.
    error FaucetAmountTooLarge(uint256 requested, uint256 max);

    constructor() ERC20("Suanli Test USD", "tUSD") ERC20Permit("Suanli Test USD") {}

    /// @notice The token uses 6 decimals, like the production stablecoins it stands in for.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Mints `amount` base units to `to`. Devnet only.
    /// @param to The receiver.
    /// @param amount Base units, at most FAUCET_MAX.
    function faucet(address to, uint256 amount) external {
        if (amount > FAUCET_MAX) revert FaucetAmountTooLarge(amount, FAUCET_MAX);
        _mint(to, amount);
    }
}
