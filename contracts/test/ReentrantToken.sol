// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Address} from "@openzeppelin/contracts/utils/Address.sol";

/// @title ReentrantToken
/// @notice Test-only hostile ERC-20: once armed, its next transfer calls back into `target` with `data`
///         before returning, the way a token with transfer hooks could. It shows that the Suanli contracts
///         refuse re-entry while value leaves them. Never deploy it anywhere but a test chain.
contract ReentrantToken is ERC20 {
    address private _target;
    bytes private _data;
    bool private _armed;

    constructor() ERC20("Reentrant", "RE") {}

    /// @notice Mints `amount` to `to` (test only).
    /// @param to The receiver.
    /// @param amount Base units.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Arms the hook: the next transfer between accounts calls `target` with `data`.
    /// @param target The contract to call back.
    /// @param data The call.
    function arm(address target, bytes calldata data) external {
        _target = target;
        _data = data;
        _armed = true;
    }

    /// @notice Whether the call made by the last armed permit succeeded.
    bool public lastPermitCallSucceeded;

    /// @notice An EIP-2612 stand-in: when armed, calls `target` with `data` (recording whether it succeeded)
    ///         instead of approving anything, the way a hostile token's permit could re-enter its caller.
    function permit(address, address, uint256, uint256, uint8, bytes32, bytes32) external {
        if (!_armed) return;
        _armed = false;
        // solhint-disable-next-line avoid-low-level-calls
        (bool ok,) = _target.call(_data);
        lastPermitCallSucceeded = ok;
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (_armed && from != address(0)) {
            _armed = false;
            Address.functionCall(_target, _data);
        }
    }
}
