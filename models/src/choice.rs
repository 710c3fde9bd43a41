//! Closed sets of named choices (models, datasets, backends): one name per value, printed by
//! `Display`, parsed back by `FromStr`, listed for a command line's help.

/// A name that is not one of a set's choices.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown value '{value}': expected one of {}", .choices.join(", "))]
pub struct UnknownChoice {
    /// What was given.
    pub value: String,
    /// What would have been accepted.
    pub choices: &'static [&'static str],
}

/// A closed set of named values (implemented by [`choices!`](crate::choices)).
pub trait Choice:
    std::str::FromStr<Err = UnknownChoice> + std::fmt::Display + Copy + Send + Sync + 'static
{
    /// The name of every value, in the order help texts list them.
    const NAMES: &'static [&'static str];
}

/// Gives a fieldless enum its names: `ALL`, `name()`, [`Choice`], `Display` and `FromStr`
/// (errors are [`UnknownChoice`]).
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// enum Colour { Red, Blue }
/// ember_models::choices!(Colour { Red => "red", Blue => "blue" });
/// assert_eq!("blue".parse::<Colour>(), Ok(Colour::Blue));
/// assert_eq!(Colour::Red.to_string(), "red");
/// assert!("green".parse::<Colour>().unwrap_err().to_string().contains("red, blue"));
/// ```
#[macro_export]
macro_rules! choices {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in the order help texts list them.
            #[allow(dead_code)]
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// The name of this value.
            #[allow(dead_code)]
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl $crate::choice::Choice for $ty {
            const NAMES: &'static [&'static str] = &[$($name),+];
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::choice::UnknownChoice;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::choice::UnknownChoice {
                        value: s.to_string(),
                        choices: <Self as $crate::choice::Choice>::NAMES,
                    }),
                }
            }
        }
    };
}
