//! A procedural corpus of simple stories: a small hand-written grammar of characters,
//! places, things, actions and feelings, sampled with a seeded generator.
//!
//! Every story follows an arc (an introduction, a day out, a problem, its solution, an
//! ending) and keeps its own facts straight: the hero's name and pronoun, the friend,
//! the place and the thing chosen at the start come back later. A model must learn that
//! structure, not memorise sentences: the combinations run into the billions.

use tempra_tensor::random::SplitMix64;

/// The text that separates stories in a generated corpus (and that the tokenizer maps to
/// its end-of-text token).
pub const STORY_SEPARATOR: &str = "<|endoftext|>";

/// Someone in a story.
#[derive(Clone, Copy, Debug)]
struct Character {
    name: &'static str,
    /// "girl", "boy", "cat", ...
    kind: &'static str,
    /// true: she/her; false: he/him.
    female: bool,
}

impl Character {
    fn subject(self) -> &'static str {
        if self.female { "she" } else { "he" }
    }
    fn subject_cap(self) -> &'static str {
        if self.female { "She" } else { "He" }
    }
    fn object(self) -> &'static str {
        if self.female { "her" } else { "him" }
    }
    fn possessive(self) -> &'static str {
        if self.female { "her" } else { "his" }
    }
}

const GIRLS: &[&str] = &[
    "Lily", "Mia", "Sue", "Anna", "Lucy", "Emma", "Zoe", "Rose", "Kate", "Amy", "Ella", "Sara",
];
const BOYS: &[&str] = &[
    "Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Tim", "Finn", "Joe", "Noah", "Dan", "Luke",
];
const GIRL_KINDS: &[&str] = &["little girl", "girl", "kind girl", "brave girl"];
const BOY_KINDS: &[&str] = &["little boy", "boy", "kind boy", "brave boy"];
const ANIMAL_KINDS: &[&str] = &[
    "cat", "dog", "bunny", "bird", "frog", "duck", "fox", "bear", "mouse", "puppy",
];
const ANIMAL_NAMES: &[&str] = &[
    "Spot", "Fluffy", "Pip", "Bella", "Coco", "Buddy", "Daisy", "Rex", "Milo", "Nutmeg",
];
const SIZES: &[&str] = &[
    "little", "small", "big", "happy", "funny", "sleepy", "curious",
];

/// A place: its name and what is there to see.
struct Place {
    name: &'static str,
    sights: &'static [&'static str],
}

const PLACES: &[Place] = &[
    Place {
        name: "the park",
        sights: &["a tall tree", "a big slide", "a blue pond", "many ducks"],
    },
    Place {
        name: "the forest",
        sights: &[
            "a tall tree",
            "a little path",
            "a pretty flower",
            "an old log",
        ],
    },
    Place {
        name: "the beach",
        sights: &[
            "a big wave",
            "a pink shell",
            "a sand castle",
            "a little crab",
        ],
    },
    Place {
        name: "the garden",
        sights: &["a red flower", "a small bee", "a green bush", "a big rock"],
    },
    Place {
        name: "the farm",
        sights: &["a brown cow", "a big barn", "a little pig", "a white hen"],
    },
    Place {
        name: "the lake",
        sights: &[
            "a small boat",
            "a green frog",
            "a long dock",
            "a white swan",
        ],
    },
    Place {
        name: "the hill",
        sights: &[
            "a tall tree",
            "a soft cloud",
            "a big rock",
            "a yellow flower",
        ],
    },
    Place {
        name: "the town",
        sights: &["a big shop", "a red bus", "a toy store", "a little bakery"],
    },
];

const HOMES: &[&str] = &[
    "a small house",
    "a big house",
    "a little cottage",
    "a blue house",
    "a cozy home",
];
const NEAR: &[&str] = &[
    "near the forest",
    "by the sea",
    "on a hill",
    "next to a farm",
    "in a quiet town",
    "near a big lake",
];

/// A thing a character owns and likes to play with.
const COLORS: &[&str] = &[
    "red", "blue", "green", "yellow", "pink", "shiny", "soft", "new",
];
const TOYS: &[&str] = &[
    "ball",
    "kite",
    "hat",
    "teddy bear",
    "toy car",
    "drum",
    "book",
    "boat",
    "doll",
    "balloon",
];
/// What one does with each toy (same order as [`TOYS`]).
const TOY_PLAY: &[&str] = &[
    "throw the ball",
    "fly the kite",
    "wear the hat",
    "hug the teddy bear",
    "push the toy car",
    "play the drum",
    "read the book",
    "sail the boat",
    "dress the doll",
    "hold the balloon",
];

const OPENERS: &[&str] = &["Once upon a time", "Once", "One day", "Long ago"];
const FEELINGS_GOOD: &[&str] = &["happy", "glad", "proud", "excited", "calm"];
const FEELINGS_BAD: &[&str] = &["sad", "scared", "upset", "worried", "lonely"];
const WEATHER: &[&str] = &["sunny", "warm", "windy", "cold", "bright", "cloudy"];
const SNACKS: &[&str] = &["apples", "cookies", "bread", "cake", "grapes", "soup"];
const ENDINGS: &[&str] = &[
    "From that day on, {A} and {B} were best friends.",
    "{A} learned that it is good to share.",
    "{A} learned that friends help each other.",
    "{A} learned to be brave.",
    "It was the best day ever.",
    "{A} went to bed with a big smile.",
    "They played together until the sun went down.",
];

/// A seeded generator of stories: the same seed gives the same stories, story by story.
///
/// ```
/// use tempra_llm::demo::StoryGenerator;
///
/// let mut g = StoryGenerator::new(7);
/// let story = g.story();
/// assert!(story.ends_with('.'));
/// assert_eq!(StoryGenerator::new(7).story(), story);
/// ```
#[derive(Clone, Debug)]
pub struct StoryGenerator {
    rng: SplitMix64,
}

impl StoryGenerator {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> StoryGenerator {
        StoryGenerator {
            rng: SplitMix64::new(seed),
        }
    }

    fn below(&mut self, n: usize) -> usize {
        ((self.rng.next_u64() >> 11) % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A child or an animal (never named `avoid`).
    fn character(&mut self, avoid: &str) -> Character {
        loop {
            let c = match self.below(5) {
                0 | 1 => Character {
                    name: self.pick(GIRLS),
                    kind: self.pick(GIRL_KINDS),
                    female: true,
                },
                2 | 3 => Character {
                    name: self.pick(BOYS),
                    kind: self.pick(BOY_KINDS),
                    female: false,
                },
                _ => Character {
                    name: self.pick(ANIMAL_NAMES),
                    kind: self.pick(ANIMAL_KINDS),
                    female: self.chance(50),
                },
            };
            if c.name != avoid {
                return c;
            }
        }
    }

    /// One story, a paragraph of sentences without a trailing newline.
    pub fn story(&mut self) -> String {
        let hero = self.character("");
        let friend = self.character(hero.name);
        let place = &PLACES[self.below(PLACES.len())];
        let toy_index = self.below(TOYS.len());
        let (toy, play) = (TOYS[toy_index], TOY_PLAY[toy_index]);
        let color = self.pick(COLORS);
        let mut s = Vec::<String>::new();

        // Introduction.
        let opener = self.pick(OPENERS);
        let kind = if ANIMAL_KINDS.contains(&hero.kind) && self.chance(50) {
            format!("{} {}", self.pick(SIZES), hero.kind)
        } else {
            hero.kind.to_string()
        };
        s.push(format!(
            "{opener}, there was {} {kind} named {}.",
            article(&kind),
            hero.name
        ));
        match self.below(3) {
            0 => s.push(format!(
                "{} lived in {} {}.",
                hero.subject_cap(),
                self.pick(HOMES),
                self.pick(NEAR)
            )),
            1 => s.push(format!(
                "{} had {} {color} {toy}.",
                hero.subject_cap(),
                article(color)
            )),
            _ => s.push(format!(
                "{} loved to play outside every day.",
                hero.subject_cap()
            )),
        }
        s.push(format!(
            "{} liked to {play} more than anything.",
            hero.subject_cap()
        ));

        // The day out.
        let weather = self.pick(WEATHER);
        match self.below(3) {
            0 => s.push(format!(
                "One {weather} day, {} went to {} with {} friend {}.",
                hero.name,
                place.name,
                hero.possessive(),
                friend.name
            )),
            1 => s.push(format!(
                "One day, {} and {} went to {}.",
                hero.name, friend.name, place.name
            )),
            _ => s.push(format!(
                "The sun was {}, so {} asked {} to go to {}.",
                if weather == "cloudy" { "hiding" } else { "out" },
                hero.name,
                friend.name,
                place.name
            )),
        }
        let sight = self.pick(place.sights);
        s.push(format!("At {}, they saw {sight}.", place.name));
        if self.chance(50) {
            s.push(format!(
                "\"Look, {}!\" said {}. \"It is so {}!\"",
                friend.name,
                hero.name,
                self.pick(&["pretty", "big", "nice", "fun", "cool"])
            ));
        }

        // The problem and its solution.
        match self.below(4) {
            0 => {
                s.push(format!(
                    "{} wanted to {play}, but {} could not find {} {toy}.",
                    hero.name,
                    hero.subject(),
                    hero.possessive()
                ));
                let bad = self.pick(FEELINGS_BAD);
                s.push(format!("{} felt {bad}.", hero.name));
                s.push(format!(
                    "{} said, \"Do not be {bad}. I will help you look.\"",
                    friend.name
                ));
                s.push(format!(
                    "They looked under {sight} and behind a bush. At last, {} found the {toy}!",
                    friend.name
                ));
                s.push(format!(
                    "{} was so {}. \"Thank you, {}!\" {} said.",
                    hero.name,
                    self.pick(FEELINGS_GOOD),
                    friend.name,
                    hero.subject()
                ));
            }
            1 => {
                s.push(format!(
                    "Then {} saw that {} was crying.",
                    hero.name, friend.name
                ));
                s.push(format!(
                    "\"Why are you {}?\" asked {}.",
                    self.pick(&["sad", "crying", "upset"]),
                    hero.name
                ));
                s.push(format!(
                    "\"I am hungry,\" said {}. \"I did not bring any {}.\"",
                    friend.name,
                    self.pick(SNACKS)
                ));
                let snack = self.pick(SNACKS);
                s.push(format!(
                    "{} had some {snack}, so {} shared them with {}.",
                    hero.name,
                    hero.subject(),
                    friend.object()
                ));
                s.push(format!(
                    "{} smiled and felt {}.",
                    friend.name,
                    self.pick(FEELINGS_GOOD)
                ));
            }
            2 => {
                s.push("Suddenly, the sky got dark and it began to rain.".to_string());
                s.push(format!(
                    "{} and {} were {}.",
                    hero.name,
                    friend.name,
                    self.pick(&["scared", "cold", "wet", "worried"])
                ));
                s.push(format!(
                    "{} saw {} and said, \"Let us hide there!\"",
                    friend.name,
                    self.pick(&["a big tree", "a small cave", "an old barn", "a little shed"])
                ));
                s.push(
                    "They waited together until the rain stopped. Then the sun came out again."
                        .to_string(),
                );
                s.push(format!(
                    "{} felt {} because {} friend was with {}.",
                    hero.name,
                    self.pick(FEELINGS_GOOD),
                    hero.possessive(),
                    hero.object()
                ));
            }
            _ => {
                s.push(format!(
                    "{} wanted to play with {} {toy}, but {} did not want to share.",
                    friend.name,
                    hero.name,
                    hero.subject()
                ));
                s.push(format!(
                    "{} felt {}, and {} went away.",
                    friend.name,
                    self.pick(FEELINGS_BAD),
                    friend.subject()
                ));
                s.push(format!(
                    "Soon {} was alone. It was not fun to {play} alone.",
                    hero.name
                ));
                s.push(format!(
                    "{} ran to {} and said, \"I am sorry. Let us play together.\"",
                    hero.name, friend.name
                ));
                s.push(format!(
                    "{} smiled. They took turns, and they both felt {}.",
                    friend.name,
                    self.pick(FEELINGS_GOOD)
                ));
            }
        }

        // The ending.
        let ending = self.pick(ENDINGS);
        s.push(ending.replace("{A}", hero.name).replace("{B}", friend.name));
        s.join(" ")
    }

    /// Stories separated by [`STORY_SEPARATOR`] until the text holds at least `bytes`
    /// bytes.
    pub fn corpus(&mut self, bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 4096);
        while text.len() < bytes {
            text.push_str(&self.story());
            text.push_str(STORY_SEPARATOR);
        }
        text
    }
}

/// "a" or "an" for the word that follows.
fn article(next: &str) -> &'static str {
    match next.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stories_are_reproducible_and_varied() {
        let a: Vec<String> = (0..50)
            .scan(StoryGenerator::new(1), |g, _| Some(g.story()))
            .collect();
        let b: Vec<String> = (0..50)
            .scan(StoryGenerator::new(1), |g, _| Some(g.story()))
            .collect();
        assert_eq!(a, b);
        let distinct: std::collections::HashSet<&String> = a.iter().collect();
        assert_eq!(distinct.len(), a.len());
        assert_ne!(StoryGenerator::new(2).story(), a[0]);
    }

    #[test]
    fn articles_agree() {
        assert_eq!(article("owl"), "an");
        assert_eq!(article("red"), "a");
        let text = StoryGenerator::new(3).corpus(20_000);
        assert!(!text.contains(" a e") && !text.contains(" a o") && !text.contains(" an r"));
        assert!(text.contains(STORY_SEPARATOR));
    }
}
