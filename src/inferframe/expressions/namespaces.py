"""The method namespaces of an Expression: ``.str``, ``.list`` and ``.struct``.

Example:
    >>> from inferframe import col
    >>> str(col("s").str.lower())
    'str.lower(col(s))'
"""

from __future__ import annotations

# Annotations name Expression as text only: importing it here would make a cycle (it imports this module lazily).


class _Namespace:
    """Functions grouped under an attribute of an Expression (``.str``, ``.list``, ``.struct``)."""

    __slots__ = ("_e",)

    def __init__(self, e: Expression) -> None:
        self._e = e


class StringNamespace(_Namespace):
    """String functions: ``col("s").str.lower()``. Null strings give null.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"s": ["Hello World", " ab "]})
        >>> df.select(ifr.col("s").str.strip().str.upper()).to_pydict()
        {'s': ['HELLO WORLD', 'AB']}
    """

    def contains(self, pattern: str, ignore_case: bool = False) -> Expression:
        """True where the string contains ``pattern`` (plain text, not a regex).

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"s": ["Hello World", " ab "]})
            >>> df.select(ifr.col("s").str.contains("world", ignore_case=True)).to_pydict()
            {'s': [True, False]}
        """
        return self._e._fn("str.contains", pattern=pattern, ignore_case=ignore_case)

    def startswith(self, prefix: str) -> Expression:
        """True where the string starts with ``prefix``.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"s": ["Hello World", " ab "]})
            >>> df.select(ifr.col("s").str.startswith("He")).to_pydict()
            {'s': [True, False]}
        """
        return self._e._fn("str.startswith", prefix=prefix)

    def endswith(self, suffix: str) -> Expression:
        """True where the string ends with ``suffix``.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"s": ["Hello World", " ab "]})
            >>> df.select(ifr.col("s").str.endswith("ld")).to_pydict()
            {'s': [True, False]}
        """
        return self._e._fn("str.endswith", suffix=suffix)

    def lower(self) -> Expression:
        """The string in lower case.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["Ab"]}).select(ifr.col("s").str.lower()).to_pydict()
            {'s': ['ab']}
        """
        return self._e._fn("str.lower")

    def upper(self) -> Expression:
        """The string in upper case.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["Ab"]}).select(ifr.col("s").str.upper()).to_pydict()
            {'s': ['AB']}
        """
        return self._e._fn("str.upper")

    def length(self) -> Expression:
        """The number of characters (not bytes).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["abc", "é"]}).select(ifr.col("s").str.length()).to_pydict()
            {'s': [3, 1]}
        """
        return self._e._fn("str.length")

    def strip(self) -> Expression:
        """The string without leading and trailing whitespace.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": [" ab \\n"]}).select(ifr.col("s").str.strip()).to_pydict()
            {'s': ['ab']}
        """
        return self._e._fn("str.strip")

    def split(self, sep: str) -> Expression:
        """Split on every ``sep`` into a list of strings.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["a,b,,c"]}).select(ifr.col("s").str.split(",")).to_pydict()
            {'s': [['a', 'b', '', 'c']]}
        """
        return self._e._fn("str.split", sep=sep)

    def replace(self, pattern: str, replacement: str, regex: bool = False) -> Expression:
        """Replace every occurrence of ``pattern`` (a regex when ``regex=True``).

        Example:
            >>> import inferframe as ifr
            >>> s = ifr.col("s")
            >>> df = ifr.from_pydict({"s": ["a  b"]})
            >>> df.select(s.str.replace(" ", "-"), s.str.replace(r"\\s+", "_", regex=True).alias("r")).to_pydict()
            {'s': ['a--b'], 'r': ['a_b']}
        """
        return self._e._fn("str.replace", pattern=pattern, replacement=replacement, regex=regex)

    def match(self, pattern: str) -> Expression:
        """True where the regex ``pattern`` matches somewhere in the string (anchor it with ^ and $).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["id-42", "x"]}).select(ifr.col("s").str.match(r"\\d+$")).to_pydict()
            {'s': [True, False]}
        """
        return self._e._fn("str.match", pattern=pattern)

    def slice(self, start: int, stop: int | None = None) -> Expression:
        """Characters ``start`` up to (not including) ``stop``, like ``s[start:stop]``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["Hello"]}).select(ifr.col("s").str.slice(1, 3)).to_pydict()
            {'s': ['el']}
        """
        return self._e._fn("str.slice", start=start, stop=stop)

    def concat(self, *others: Any) -> Expression:
        """Append other strings, columns or values (non-strings are cast to strings).

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"s": ["item"], "n": [7]})
            >>> df.select(ifr.col("s").str.concat("-", ifr.col("n"))).to_pydict()
            {'s': ['item-7']}
        """
        return self._e._fn("str.concat", *others)


class ListNamespace(_Namespace):
    """List functions: ``col("tags").list.get(0)``. Null lists give null.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"tags": [["a", "b"], []]})
        >>> df.select(ifr.col("tags").list.get(0).alias("first"), ifr.col("tags").list.length()).to_pydict()
        {'first': ['a', None], 'tags': [2, 0]}
    """

    def get(self, index: int) -> Expression:
        """The element at ``index`` (negative counts from the end); null where the list is too short.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"l": [["a", "b"], []]}).select(ifr.col("l").list.get(-1)).to_pydict()
            {'l': ['b', None]}
        """
        return self._e._fn("list.get", index=index)

    def length(self) -> Expression:
        """The number of elements.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"l": [[1, 2], []]}).select(ifr.col("l").list.length()).to_pydict()
            {'l': [2, 0]}
        """
        return self._e._fn("list.length")

    def join(self, sep: str) -> Expression:
        """Join a list of strings into one string, ``sep`` between elements.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"l": [["a", "b"]]}).select(ifr.col("l").list.join(", ")).to_pydict()
            {'l': ['a, b']}
        """
        return self._e._fn("list.join", sep=sep)


class StructNamespace(_Namespace):
    """Struct functions: ``col("s").struct.get("field")``.

    Example:
        >>> import inferframe as ifr
        >>> ifr.from_pydict({"p": [{"name": "Ann", "age": 3}]}).select(ifr.col("p").struct.get("age")).to_pydict()
        {'age': [3]}
    """

    def get(self, field: str) -> Expression:
        """The value of one field; the output column is named after the field.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"p": [{"name": "Ann"}, None]}).select(ifr.col("p").struct.get("name")).to_pydict()
            {'name': ['Ann', None]}
        """
        return self._e._fn("struct.get", field=field).alias(field)
