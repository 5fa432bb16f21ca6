//! The subset of DynamoDB's expression language the in-memory table
//! evaluates: what this repository's writers send, and nothing more.
//! Anything else is refused with the expression in the message, so a test
//! never passes on a condition that was silently ignored.
//!
//! Conditions (developer guide, "Condition and filter expressions,
//! operators, and functions"): `attribute_exists(p)`,
//! `attribute_not_exists(p)`, `a = b`, `<>`, `<`, `<=`, `>`, `>=` between
//! top-level attributes and `:values`, `AND`, `OR`, `NOT` and parentheses,
//! with DynamoDB's precedence (`NOT` over `AND` over `OR`). A comparison of
//! a missing attribute, or of two values of different types, is false
//! (`<>` of two types is true; `<>` of a missing attribute is refused).
//!
//! Updates ("Using update expressions"): `SET p = operand, …`,
//! `ADD p :number, …` (a missing attribute counts as 0) and `REMOVE p, …`.

use std::cmp::Ordering;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::Item;

type Names = HashMap<String, String>;
type Values = HashMap<String, AttributeValue>;

/// The placeholders an expression is evaluated with.
pub(super) struct Scope<'a> {
    pub names: &'a Names,
    pub values: &'a Values,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Name(String),
    Value(String),
    Open,
    Close,
    Comma,
    Op(&'static str),
}

fn tokens(expression: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = expression.chars().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let word_end = |from: usize| {
            let mut j = from;
            while chars
                .get(j)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                j += 1;
            }
            j
        };
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => (out.push(Token::Open), i += 1).1,
            ')' => (out.push(Token::Close), i += 1).1,
            ',' => (out.push(Token::Comma), i += 1).1,
            '#' | ':' => {
                let end = word_end(i + 1);
                let text: String = chars[i..end].iter().collect();
                out.push(if c == '#' {
                    Token::Name(text)
                } else {
                    Token::Value(text)
                });
                i = end;
            }
            '=' => (out.push(Token::Op("=")), i += 1).1,
            '<' | '>' => {
                let next = chars.get(i + 1).copied();
                let op = match (c, next) {
                    ('<', Some('>')) => "<>",
                    ('<', Some('=')) => "<=",
                    ('>', Some('=')) => ">=",
                    ('<', _) => "<",
                    _ => ">",
                };
                i += op.len();
                out.push(Token::Op(op));
            }
            c if c.is_alphabetic() => {
                let end = word_end(i);
                out.push(Token::Word(chars[i..end].iter().collect()));
                i = end;
            }
            other => return Err(format!("unsupported character {other:?}")),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    scope: &'a Scope<'a>,
    item: &'a Item,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn keyword(&mut self, word: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word));
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, token: &Token) -> Result<(), String> {
        match self.next() {
            Some(t) if &t == token => Ok(()),
            other => Err(format!("expected {token:?}, found {other:?}")),
        }
    }

    // Every branch is parsed whole (no short cut), so a malformed right-hand
    // side is an error whatever the left-hand side gave.
    fn or(&mut self) -> Result<bool, String> {
        let mut value = self.and()?;
        while self.keyword("OR") {
            value |= self.and()?;
        }
        Ok(value)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut value = self.not()?;
        while self.keyword("AND") {
            value &= self.not()?;
        }
        Ok(value)
    }

    fn not(&mut self) -> Result<bool, String> {
        if self.keyword("NOT") {
            return Ok(!self.not()?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<bool, String> {
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            let value = self.or()?;
            self.expect(&Token::Close)?;
            return Ok(value);
        }
        for (function, exists) in [("attribute_exists", true), ("attribute_not_exists", false)] {
            if self.keyword(function) {
                self.expect(&Token::Open)?;
                let path = self.path()?;
                self.expect(&Token::Close)?;
                return Ok(self.item.contains_key(&path) == exists);
            }
        }
        let left = self.operand()?;
        let op = match self.next() {
            Some(Token::Op(op)) => op,
            other => return Err(format!("expected a comparison, found {other:?}")),
        };
        let right = self.operand()?;
        let (Some(left), Some(right)) = (left, right) else {
            if op == "<>" {
                return Err("`<>` on a missing attribute is not decided here".into());
            }
            return Ok(false);
        };
        let Some(order) = compare(&left, &right) else {
            return Ok(op == "<>");
        };
        Ok(match op {
            "=" => order == Ordering::Equal,
            "<>" => order != Ordering::Equal,
            "<" => order == Ordering::Less,
            "<=" => order != Ordering::Greater,
            ">" => order == Ordering::Greater,
            _ => order != Ordering::Less,
        })
    }

    fn path(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Token::Name(name)) => self
                .scope
                .names
                .get(&name)
                .cloned()
                .ok_or_else(|| format!("{name} is not in ExpressionAttributeNames")),
            Some(Token::Word(word)) => Ok(word),
            other => Err(format!("expected an attribute, found {other:?}")),
        }
    }

    fn value(&mut self) -> Result<AttributeValue, String> {
        match self.next() {
            Some(Token::Value(value)) => self
                .scope
                .values
                .get(&value)
                .cloned()
                .ok_or_else(|| format!("{value} is not in ExpressionAttributeValues")),
            other => Err(format!("expected a :value, found {other:?}")),
        }
    }

    /// A `:value`, or an attribute's value (`None` when it is missing).
    fn operand(&mut self) -> Result<Option<AttributeValue>, String> {
        if matches!(self.peek(), Some(Token::Value(_))) {
            return self.value().map(Some);
        }
        let path = self.path()?;
        Ok(self.item.get(&path).cloned())
    }
}

/// The order of two scalars of one type; `None` for different types or
/// for types that do not order.
fn compare(left: &AttributeValue, right: &AttributeValue) -> Option<Ordering> {
    match (left, right) {
        (AttributeValue::S(a), AttributeValue::S(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (AttributeValue::N(a), AttributeValue::N(b)) => number(a)?.partial_cmp(&number(b)?),
        (a, b) if a == b => Some(Ordering::Equal),
        _ => None,
    }
}

fn number(n: &str) -> Option<f64> {
    n.trim().parse().ok()
}

/// Whether `item` (empty when absent) meets `condition`.
pub(super) fn condition(condition: &str, scope: &Scope<'_>, item: &Item) -> Result<bool, String> {
    let mut parser = Parser {
        tokens: tokens(condition)?,
        at: 0,
        scope,
        item,
    };
    let value = parser.or()?;
    match parser.peek() {
        None => Ok(value),
        Some(rest) => Err(format!("unexpected {rest:?}")),
    }
}

/// Applies `update` to `item` in place.
pub(super) fn update(update: &str, scope: &Scope<'_>, item: &mut Item) -> Result<(), String> {
    let snapshot = item.clone();
    let mut parser = Parser {
        tokens: tokens(update)?,
        at: 0,
        scope,
        item: &snapshot,
    };
    while parser.peek().is_some() {
        let clause = match parser.next() {
            Some(Token::Word(w)) => w.to_ascii_uppercase(),
            other => return Err(format!("expected SET, ADD or REMOVE, found {other:?}")),
        };
        loop {
            let path = parser.path()?;
            match clause.as_str() {
                "SET" => {
                    parser.expect(&Token::Op("="))?;
                    match parser.operand()? {
                        Some(value) => item.insert(path, value),
                        None => return Err(format!("SET {path} from a missing attribute")),
                    };
                }
                "ADD" => {
                    let AttributeValue::N(add) = parser.value()? else {
                        return Err(format!("ADD {path}: only numbers are supported"));
                    };
                    let current = match item.get(&path) {
                        None => 0.0,
                        Some(AttributeValue::N(n)) => number(n).ok_or("not a number")?,
                        Some(_) => {
                            return Err(format!("ADD {path}: the attribute is not a number"))
                        }
                    };
                    let sum = current + number(&add).ok_or("not a number")?;
                    item.insert(path, AttributeValue::N(format_number(sum)));
                }
                "REMOVE" => {
                    item.remove(&path);
                }
                other => return Err(format!("unsupported update clause {other}")),
            }
            if parser.peek() == Some(&Token::Comma) {
                parser.at += 1;
            } else {
                break;
            }
        }
    }
    Ok(())
}

fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}
