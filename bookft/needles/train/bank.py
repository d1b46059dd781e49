"""The training generator's phrase bank: instructions, needle sentences, questions and answer prefixes.

Design choices:
- Written for this generator, in many syntactic forms (statements, notes, inversions, imperative
  questions), so a model trained on them learns to find a fact, not to answer one template. None
  shares a run of six words with an eval template (tests/needles/test_generators_disjoint.py).
- Vartrack's answer prefixes often restate the count and the value before the names ("{n} variables
  end up with {value}. Their names are"), as a reply that repeats the question does, so the names
  follow numbers the model has just read and it is taught to go on with names rather than copy them.
- Slots: {key}, {value}, {label} (what the value is: "locker number", "password", ...),
  {labels} (its plural), {keys} (several keys), {n}; vartrack: {var}, {src}, {value}.
- Labels depend on the value's kind (number, word, name, date), so the sentences read naturally.
"""

from __future__ import annotations

LABELS = {
    "number": (("locker number", "locker numbers"), ("ticket number", "ticket numbers"),
               ("room number", "room numbers"), ("badge number", "badge numbers"),
               ("parcel reference", "parcel references"), ("combination", "combinations"),
               ("account code", "account codes"), ("platform code", "platform codes")),
    "word": (("password", "passwords"), ("code word", "code words"), ("watchword", "watchwords"),
             ("nickname", "nicknames"), ("favourite word", "favourite words"), ("call sign", "call signs")),
    "name": (("emergency contact", "emergency contacts"), ("guardian", "guardians"), ("mentor", "mentors"),
             ("travel companion", "travel companions"), ("deputy", "deputies"), ("landlady", "landladies")),
    "date": (("delivery date", "delivery dates"), ("deadline", "deadlines"), ("renewal date", "renewal dates"),
             ("appointment", "appointments"), ("launch date", "launch dates"), ("inspection date", "inspection dates")),
}

INSTRUCTIONS = (
    "A few short records are scattered through the passage below. Keep them in mind; a question comes at the end.\n",
    "Somewhere in this long document there are notes about particular items. Read everything, then answer.\n",
    "The text that follows hides some facts among ordinary prose. You will be asked about one of them.\n",
    "Pay attention to any stated codes, names or dates in the pages below; you will need them afterwards.\n",
    "Below is an extract. Tucked inside it are small pieces of information that a later question relies on.\n",
    "Read on. Some lines in this passage record details that you must recall once it ends.\n",
    "This is a long reading. A handful of its sentences carry data; the rest is background.\n",
    "Go through the following pages. One or more entries in them answer the question placed after them.\n",
    "Several facts have been slipped into the story below. Track them carefully.\n",
    "The following material mixes narrative with a few records. After reading, reply to the question.\n",
    "Study the document below closely, since a detail from it will be requested.\n",
    "Among the paragraphs that follow are some registered details. Recall them when asked.\n",
    "Here is some text with certain assignments buried in it. Note them as you read.\n",
    "Look out for entries about people and things in what follows; the final question concerns them.\n",
    "What comes next is lengthy. Somewhere in it is the information you will be quizzed on.\n",
    "Keep a mental log of the recorded values in this passage; a query follows it.\n",
)

NEEDLES = (
    "The {label} for {key} is {value}.",
    "{key} has {value} as its {label}.",
    "Note: {key} -> {label}: {value}.",
    "For {key}, the {label} on file is {value}.",
    "{value} is the {label} that belongs to {key}.",
    "Remember that the {label} of {key} is {value}.",
    "According to the register, {key} was given the {label} {value}.",
    "Record: {key}; {label}; {value}.",
    "It was decided that {key} would get {value} as the {label}.",
    "Whoever asks about {key} should know its {label} is {value}.",
    "The clerk wrote down {value} as the {label} of {key}.",
    "As for {key}, its {label} reads {value}.",
    "Entry for {key} - {label} = {value}.",
    "The {label} assigned to {key} turned out to be {value}.",
    "In the files, {key} is listed with the {label} {value}.",
    "Nobody forgot that {value} was the {label} for {key}.",
    "Under {key}, the ledger shows a {label} of {value}.",
    "({key}: {label} {value})",
    "Keep this in mind: {key} goes with the {label} {value}.",
    "The notice said the {label} of {key} would be {value}.",
    "They set {value} as the {label} of {key}.",
    "Officially, {key} carries the {label} {value}.",
)

QUESTIONS = (
    "What is the {label} of {key}?",
    "Which {label} was given to {key}?",
    "Tell me the {label} recorded for {key}.",
    "Looking back over the passage, what {label} belongs to {key}?",
    "{key} has a {label} somewhere in the text. What is it?",
    "Give the {label} that goes with {key}.",
    "Recall the {label} listed under {key}.",
    "What {label} did the document assign to {key}?",
    "Find {key} in the reading: what is its {label}?",
    "Which value is the {label} of {key}?",
    "Report the {label} of {key}, as written above.",
    "Question: {key}'s {label}?",
    "State the {label} associated with {key}.",
    "If someone needed the {label} of {key}, what would you tell them?",
    "From the passage, extract the {label} for {key}.",
)

PREFIXES = (
    "The {label} of {key} is",
    "{key}'s {label} is",
    "Answer:",
    "It is",
    "The {label} recorded for {key} was",
    "{key} -> {label}:",
    "The value is",
    "Reply:",
    "The document gives",
    "That {label} is",
    "Here it is:",
    "{key} has the {label}",
)

MULTI_QUESTIONS = (
    "List every {label} the text gives for {key}.",
    "{key} appears with several {labels}. Name all of them.",
    "Which {labels} are recorded for {key}? Give each one.",
    "Collect all the {labels} that belong to {key}.",
    "What are the {labels} of {key}, in the order they appear?",
    "Enumerate each {label} linked to {key} in the passage.",
    "Gather the {labels} mentioned for {key}.",
    "Name all {n} {labels} of {key}.",
)

MULTI_PREFIXES = (
    "The {labels} of {key} are",
    "All {labels} for {key}:",
    "{key} has these {labels}:",
    "In order of appearance:",
    "They are",
    "Answer:",
    "The {n} {labels} are",
)

VT_INSTRUCTIONS = (
    "The passage below contains a small program spread over many lines of prose. Follow its assignments.\n",
    "Some variables get values in the text that follows, and some copy other variables. Keep track.\n",
    "Watch for statements that set or copy variables in this reading; you will be asked which share a value.\n",
    "Hidden in the following pages are assignments between named variables. Trace them.\n",
    "Read the text and note every variable that is set, and what it is set from.\n",
    "Inside this document, values pass from one variable to another. Follow each transfer.\n",
    "There are variable bindings buried in the prose below; a question about them follows.\n",
    "Track the values of the variables introduced in the next passage.\n",
    "Variables are declared and copied in scattered lines of the document below. Keep track of which ones "
    "end up with the same value.\n",
    "A chain of assignments runs through this text, one link at a time. Remember each link.\n",
    "Some sentences below give numbers to names, and others copy one name into another. Follow them all.\n",
    "This reading hides a few assignment statements. Note which variable is copied from which.\n",
    "Below, a value is stored once and then handed on from variable to variable. Keep a record of the "
    "hand-offs.\n",
    "Read carefully: the prose that follows contains code-like lines that bind and rebind names.\n",
)

VT_SET = (
    "Let {var} be {value}.",
    "Set {var} to {value}.",
    "{var} := {value}",
    "The variable {var} starts out holding {value}.",
    "Assign {value} to {var}.",
    "{var} is initialised with {value}.",
    "We store {value} in {var}.",
    "At first, {var} contains {value}.",
    "let {var} = {value};",
    "{var} <- {value}",
    "const {var} = {value}",
    "{var} = {value}",
    "Put {value} into {var}.",
    "The value of {var} is {value}.",
    "{var} equals {value}.",
    "{var} was set to {value} at the start.",
)

VT_COPY = (
    "Let {var} be equal to {src}.",
    "Copy {src} into {var}.",
    "{var} := {src}",
    "{var} takes whatever value {src} holds.",
    "Set {var} from {src}.",
    "The variable {var} now mirrors {src}.",
    "{var} receives the contents of {src}.",
    "Assign {src} to {var} as well.",
    "{var} is made identical to {src}.",
    "Store the value of {src} in {var}.",
    "let {var} = {src};",
    "{var} <- {src}",
    "const {var} = {src}",
    "{var} = {src}",
    "{var} gets {src}.",
    "Make {var} equal to {src}.",
    "From here on {var} holds the same as {src}.",
    "{var} was copied from {src}.",
)

VT_QUESTIONS = (
    "Which variables end up holding {value}?",
    "Name every variable whose value is {value}.",
    "List all variables equal to {value} once the assignments are done.",
    "After following the copies, which variables contain {value}?",
    "Which names refer to the value {value}?",
    "Give all variables that carry {value}.",
    "Find each variable set, directly or through copies, to {value}.",
    "What variables share the value {value}?",
    "Question: which variables were given {value}, either directly or by copying?",
    "Q: which names hold {value} once the program has run?",
    "Query: every variable whose final value is {value}?",
    "Which variables does the value {value} pass through?",
    "Follow {value} through the assignments. Which variables does it reach?",
    "Start at the variable set to {value} and list every variable copied from it, directly or not.",
    "Who holds {value}? Answer with variable names only.",
    "In the passage before this question, which variables get {value}?",
    "Trace every copy of {value}. Which variable names carry it at the end?",
    "The number {value} was assigned once and then copied. Into which variables?",
    "Name the variables that store {value}, not the value itself.",
    "Which identifiers share the value {value} after all the copying?",
)

VT_PREFIXES = (
    "The variables holding {value} are",
    "Variables with {value}:",
    "Answer:",
    "They are",
    "Holding {value}:",
    "These {n} variables:",
    "The ones equal to {value} are",
    "In order:",
    "{n} variables end up with {value}. Their names are",
    "Following the copies, {value} is held by {n} variables:",
    "The value {value} reaches {n} variables, namely",
    "Tracing {value} through the text, the {n} variables holding it are",
    "There are {n} of them holding {value}:",
    "Variables set to {value}, {n} in all:",
    "By the end, {n} names carry {value}. They are",
    "Answer: {n} variables hold {value}; they are named",
    "The names are",
    "Reading the assignments in order:",
    "Variable names:",
    "Result:",
)
