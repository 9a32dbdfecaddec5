// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title FeeOnTransferToken
/// @notice Test-only ERC-20 that burns 1 % of every transfer between accounts, the way fee-on-transfer
///         tokens deliver less than the amount sent. Suanli refuses such transfers. Never deploy it anywhere
///         but a test chain.
contract FeeOnTransferToken is ERC20 {
    constructor() ERC20("Fee on transfer", "FOT") {}

    /// @notice 6 decimals, like the stablecoins a deployment settles in: the deploy's fee check, not its decimals
    ///         check, is what refuses it.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Mints `amount` to `to` (test only).
    /// @param to The receiver.
    /// @param amount Base units.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from == address(0) || to == address(0)) {
            super._update(from, to, value);
            return;
        }
        uint256 fee = value / 100;
        super._update(from, address(0), fee);
        super._update(from, to, value - fee);
    }
}
