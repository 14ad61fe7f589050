"""The errors a user can cause, at the foot of the package: every layer raises them, and each message names the op,
the argument and what was expected."""


class SpecError(ValueError):
    """A user-supplied value that the op cannot take. The message names op, argument and expectation."""


class DeclarationError(SpecError):
    """A declaration that disagrees with the op's schema, or an op we cannot take. Names op and argument."""
